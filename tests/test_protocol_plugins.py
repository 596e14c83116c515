"""Protocols as plugins: a scenario names its own entry (``protocol.entry``) or a name a
package registers under the entry-point group ``elastic_sim.protocols``; ``variant()``
changes no global state; the guide's worked example runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_sim import registry
from elastic_sim.cli import main
from elastic_sim.pipeline import simulate
from elastic_sim.registry import BUILTIN_PROTOCOLS, find_protocol, protocol_names
from elastic_sim.scenario import load_scenario
from elastic_sim.testing import load, variant
from tests.conftest import ROOT, SCENARIOS

GUIDE = ROOT / "docs" / "writing-a-protocol.md"
ENTRY = "tests.explore.variants:no_rollback_main"


def guide_files() -> dict[str, str]:
    """The guide's files: fenced blocks whose first line is ``# file: NAME``."""
    blocks = re.findall(r"```\w+\n# file: (\S+)\n(.*?)```", GUIDE.read_text("utf-8"), re.S)
    return dict(blocks)


def guide_commands(real: bool) -> list[str]:
    """The guide's ``$ ...`` commands (with or without the real-mode ones)."""
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text("utf-8"), re.S)
    return [line[2:] for block in blocks if ("--mode real" in block) == real
            for line in block.splitlines() if line.startswith("$ ")]


@pytest.fixture
def guide_dir(tmp_path: Path) -> Path:
    """A directory holding the guide's files, as a reader would make it."""
    files = guide_files()
    assert set(files) == {"one_round.py", "one_round.yaml", "test_one_round.py"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _run_commands(cwd: Path, commands: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # elastic_sim from this checkout
    for cmd in commands:
        assert cmd.startswith("python ")
        argv = [sys.executable, *cmd.split()[1:]]
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.slow
def test_the_guide_example_runs_as_written(guide_dir: Path) -> None:
    commands = guide_commands(real=False)
    assert commands == ["python -m elastic_sim run one_round.yaml",
                        "python -m pytest -q test_one_round.py"]
    _run_commands(guide_dir, commands)
    summary = (guide_dir / "runs" / "one_round-sim-s0" / "summary.json").read_text()
    assert '"verdict": "pass"' in summary and "CollectiveFailed" in summary


@pytest.mark.slow
def test_the_guide_property_test_can_fail(guide_dir: Path) -> None:
    """The same property test over a broken copy of the example (every member claims rank
    0) fails: it is a test of the protocol, not of nothing."""
    src = guide_dir / "one_round.py"
    src.write_text(src.read_text().replace("rank=rank, world_size", "rank=0, world_size"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_one_round.py"],
                          cwd=guide_dir, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1
    assert "rank_validity" in proc.stdout


@pytest.mark.real
def test_the_guide_example_runs_in_real_mode(guide_dir: Path) -> None:
    pytest.importorskip("torch")
    _run_commands(guide_dir, guide_commands(real=True))


def test_the_guide_table_of_check_reads_is_current() -> None:
    from elastic_sim.checks.reads import reads_table

    text = GUIDE.read_text("utf-8")
    block = text.split("<!-- check-reads:", 1)[1].split("-->", 1)[1]
    assert block.split("<!-- /check-reads -->")[0].strip() == reads_table()


def test_check_reads_are_found_from_the_checks() -> None:
    from elastic_sim.checks.reads import reads_table

    rows = {r.split("|")[1].strip(" `"): r.split("|")[2] for r in reads_table().splitlines()[2:]}
    assert "`rdzv_done`" in rows["rank_validity"] and "`sync`" in rows["state_agreement"]
    # held in a constant (PROGRESS), found by the probe, not the source scan:
    assert "`job_failed`" in rows["progress_after_faults"]
    assert "`coll_enter`" not in rows["terminates"]


# -- protocol.entry ------------------------------------------------------------------------


def test_a_scenario_names_its_own_entry(tmp_path: Path) -> None:
    text = (SCENARIOS / "scale_down.yaml").read_text().replace(
        "name: static", f"entry: {ENTRY}\n  knobs_class: "
        "elastic_sim.protocols.static.settings:StaticKnobs", 1)
    assert f"entry: {ENTRY}" in text
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    sc = load_scenario(path)
    assert sc.protocol_info().entry == ENTRY
    events, _, _ = simulate(sc, sc.seed)
    assert events[0].kind == "run_start"
    starts = [e for e in events if e.kind == "proc_start"]
    assert starts and all(e.get("entry") == ENTRY for e in starts)
    # the broken variant's restore keeps its steps: the checks see it under this fault
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) in (0, 1)


@pytest.mark.parametrize(("proto", "where", "says"), [
    ("{entry: nosuch_module_xyz:main}", "protocol.entry", "cannot import"),
    ("{entry: not-an-entry}", "protocol.entry", "expected 'module:name'"),
    ("{entry: tests.explore.variants:no_such_fn}", "protocol.entry", "cannot import"),
    (f"{{entry: {ENTRY}, knobs_class: tests.explore.variants:NoRollbackMember}}",
     "protocol.knobs_class", "is not a dataclass"),
    (f"{{entry: {ENTRY}, knobs_class: elastic_sim.protocols.static.settings:StaticKnobs, "
     "knobs: {min_host: 2}}", "protocol.knobs.min_host", "did you mean 'min_hosts'"),
    ("{knobs: {}}", "protocol.name", "expected a protocol name, or an entry"),
    ("{name: nosuch}", "protocol.name", "unknown protocol 'nosuch'"),
])
def test_bad_protocol_references_are_bad_input(
        proto: str, where: str, says: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"protocol: {proto}\ncluster: {{hosts: 2}}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{path}: {where}: " in err and says in err, err


def test_knobs_without_a_class_are_passed_as_given(tmp_path: Path) -> None:
    info = find_protocol(None, ENTRY)
    assert info is not None and info.knobs is None
    assert registry.validate_knobs(info, {"anything": [1, 2]}) == {"anything": [1, 2]}


# -- variant() -----------------------------------------------------------------------------


def test_variant_mutates_no_registry() -> None:
    before = dict(BUILTIN_PROTOCOLS)
    names = protocol_names()
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "mine", ENTRY, min_hosts=3)
    assert BUILTIN_PROTOCOLS == before and protocol_names() == names
    assert sc.protocol.entry == ENTRY and sc.protocol.name == "mine"
    assert sc.protocol.knobs_class == "elastic_sim.protocols.static.settings:StaticKnobs"
    assert sc.knobs()["min_hosts"] == 3
    # the scenario alone (e.g. pickled to a worker, or dumped to a reproducer) finds it again
    from elastic_sim.scenario import parse_scenario, scenario_dict

    again = parse_scenario(scenario_dict(sc))
    assert again.protocol_info().entry == ENTRY


def test_variant_with_an_unimportable_entry_fails_at_once() -> None:
    from elastic_sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"protocol\.entry"):
        variant(load(SCENARIOS / "scale_down.yaml"), "mine", "nosuch_module_xyz:main")


# -- entry-point group ---------------------------------------------------------------------


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[str]:
    """A package ``es_plugin_pkg`` installed (a dist-info on sys.path) that registers two
    protocols under ``elastic_sim.protocols``: one with a knobs class, one bare entry."""
    pkg = tmp_path / "es_plugin_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from elastic_sim.protocols.static.settings import StaticKnobs as Knobs\n"
        "from elastic_sim.registry import ProtocolInfo\n\n"
        "PROTOCOL = ProtocolInfo(entry='tests.explore.variants:no_rollback_main',\n"
        "                        knobs=Knobs, summary='a plugin')\n")
    dist = tmp_path / "es_plugin_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: es-plugin-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[elastic_sim.protocols]\nes_plugin = es_plugin_pkg:PROTOCOL\n"
        f"es_bare = {ENTRY}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield "es_plugin"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("es_plugin_pkg", None)


def test_a_registered_name_runs(installed_plugin: str, tmp_path: Path) -> None:
    assert installed_plugin in protocol_names() and "es_bare" in protocol_names()
    path = tmp_path / "plug.yaml"
    path.write_text((SCENARIOS / "scale_down.yaml").read_text().replace(
        "name: static", f"name: {installed_plugin}", 1))
    sc = load_scenario(path)
    assert sc.protocol_info().entry == ENTRY
    assert sc.knobs()["min_hosts"] == 2 and sc.knobs()["skip_state_broadcast"] is False
    rc = main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet", "--no-report"])
    assert rc in (0, 1)
    assert (tmp_path / "o" / "summary.json").is_file()
    bare = find_protocol("es_bare")
    assert bare is not None and bare.entry == ENTRY and bare.knobs is None


def test_a_registered_name_with_an_unknown_knob_is_bad_input(
        installed_plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plug.yaml"
    path.write_text(f"protocol: {{name: {installed_plugin}, knobs: {{min_hostz: 2}}}}\n"
                    "cluster: {hosts: 2}\n")
    assert main(["validate", str(path)]) == 2
    assert "protocol.knobs.min_hostz" in capsys.readouterr().err


def test_without_the_package_the_name_is_unknown(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plug.yaml"
    path.write_text("protocol: {name: es_plugin}\ncluster: {hosts: 2}\n")
    assert main(["validate", str(path)]) == 2
    assert "unknown protocol 'es_plugin'" in capsys.readouterr().err
