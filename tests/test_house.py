"""The hallways: every command takes a built-in scenario's name; a backend is one class and
one registry line (a toy backend, made here, runs through ``run``, ``compare`` and the
contract suite); no code outside the backends switches on the mode; the tool's own modules
import in one direction (no module imports its callers)."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import networkx as nx
import pytest

from elastic_sim.backends import BACKENDS, Backend, FaultTable
from elastic_sim.builtin import builtin_dir
from elastic_sim.cli import main
from elastic_sim.guards import RunGuard
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult
from tests.conftest import ROOT


class FineSim(Backend):
    """A toy backend: the simulator at the fine fidelity (every step of every worker)."""

    name: ClassVar[str] = "fine"
    summary: ClassVar[str] = "the simulator, every step of every worker"
    clock: ClassVar[str] = "virtual"
    deterministic: ClassVar[bool] = True
    realism: ClassVar[int] = 0

    def fault_table(self) -> FaultTable:
        from elastic_sim.sim.faults import SIM_HANDLERS

        return SIM_HANDLERS

    def run(self, spec: Any, emit: Callable[[TraceEvent], None], guard: RunGuard,
            workdir: Path, progress: Any = None) -> RunResult:
        from elastic_sim import sim

        world = dataclasses.replace(spec.world, fidelity="fine")
        return sim.run(world, list(spec.faults), spec.seed, emit, spec.tie_seed, guard)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Backend:
    """FineSim, registered for the test (the one line a new backend takes)."""
    backend = FineSim()
    monkeypatch.setitem(BACKENDS, backend.name, backend)
    return backend


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_toy_backend_runs_a_shipped_scenario(toy: Backend, tmp_path: Path) -> None:
    assert main(["run", "scale_down", "--mode", "fine", "--out", str(tmp_path / "fine"),
                 "--no-report", "--quiet"]) == 0
    assert main(["run", "scale_down", "--out", str(tmp_path / "sim"), "--no-report",
                 "--quiet"]) == 0
    fine, fast = _lines(tmp_path / "fine" / "trace.jsonl"), _lines(tmp_path / "sim" / "trace.jsonl")
    assert fine[0]["data"]["mode"] == "fine" and fast[0]["data"]["mode"] == "sim"
    fine[0]["data"]["mode"] = "sim"
    # Fine fidelity steps every worker (no train_steps summaries), to the same history.
    assert not any(e["kind"] == "train_steps" for e in fine)
    summary = json.loads((tmp_path / "fine" / "summary.json").read_text())
    assert summary["mode"] == "fine" and summary["verdict"] == "pass"


def test_a_toy_backend_is_compared_with_the_sim(toy: Backend, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "scale_down", "--modes", "sim,fine", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["modes"] == ["sim", "fine"] and doc["agree"]
    assert doc["summaries"]["fine"]["membership"] == doc["summaries"]["sim"]["membership"]
    assert "AGREE" in capsys.readouterr().out


def test_a_toy_backend_meets_the_contract_suite(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite's backends come from the registry at collection: a plugin registers the toy
    # (in a pytest of its own, so the registration ends with it).
    pytester.makepyfile(toy_plugin="from elastic_sim.backends import register\n"
                        "from tests.test_house import FineSim\n"
                        "register(FineSim())\n")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{pytester.path}")
    res = pytester.runpytest_subprocess(
        "-p", "toy_plugin", str(ROOT / "tests" / "contract"), "-m", "not real", "-k", "fine",
        "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT))
    outcomes = res.parseoutcomes()
    assert outcomes.get("passed", 0) >= 10 and "failed" not in outcomes, res.stdout.str()


def test_an_unknown_mode_is_bad_input(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    assert main(["compare", "scale_down", "--modes", "sim,nope", "--out", str(tmp_path)]) == 2
    assert "expected distinct modes among sim, real, torchrun" in capsys.readouterr().err


# -- every command takes a built-in scenario's name --------------------------------------

BUILTIN = "torchelastic/scale_down"
BUILTIN_OF = {"torchft": "torchft/replica_crash"}
"""A built-in scenario of the one protocol a mode runs (upstream's own code)."""


def test_run_takes_a_built_in_name(tmp_path: Path) -> None:
    assert main(["run", BUILTIN, "--out", str(tmp_path), "--no-report", "--quiet"]) == 0


def _placements() -> list[tuple[str, str]]:
    return [(name, launcher) for name, b in BACKENDS.items() for launcher in b.launchers
            if not b.deterministic]


@pytest.mark.parametrize(("mode", "launcher"), _placements())
def test_run_in_every_mode_and_launcher_takes_a_built_in_name(
        mode: str, launcher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import elastic_sim.pipeline
    import elastic_sim.real.cluster.launchers as launchers

    pytest.importorskip("torch", reason="real and torchrun mode need torch")
    seen: list[Any] = []

    class Reached(Exception):
        pass

    def compiled(spec: Any, out: Path, **_: Any) -> None:
        seen.append(spec)
        raise Reached  # as far as this test goes: the run would start here

    monkeypatch.setattr(elastic_sim.pipeline, "execute", compiled)
    monkeypatch.setattr(launchers, "check_allocation", lambda world, opts: None)
    # the stop below is an internal error to main(): its traceback file goes here, not /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "out"
    name = BUILTIN_OF.get(mode, BUILTIN)
    rc = main(["run", name, "--mode", mode, "--launcher", launcher, "--out", str(out)])
    file = str(builtin_dir() / f"{name}.yaml")
    if launcher == "k8s":  # writes the manifests to apply (the scenario in them), runs nothing
        docs = (out / "k8s" / "elastic-sim.yaml").read_text().split("---\n")[1:]
        maps = [json.loads(d) for d in docs if json.loads(d)["kind"] == "ConfigMap"]
        assert rc == 0 and maps[0]["data"]["scenario.yaml"] == Path(file).read_text()
        return
    (saved,) = tmp_path.glob("elastic-sim-traceback-*.txt")
    assert rc == 3 and "Reached" in saved.read_text()
    (spec,) = seen
    assert spec.file == file and spec.mode == mode
    assert launcher == "local" or spec.launch.scenario_file == file


def test_explore_takes_a_built_in_name(tmp_path: Path) -> None:
    assert main(["explore", BUILTIN, "--budget", "2", "--faults", "crash", "--out",
                 str(tmp_path)]) in (0, 1)
    assert json.loads((tmp_path / "explore.json").read_text())["cases"] == 2


def test_sweep_takes_a_built_in_name(tmp_path: Path) -> None:
    assert main(["sweep", BUILTIN, "--seeds", "1-2", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "te_scale_down-sim-s1", "te_scale_down-sim-s2"]


def test_compare_takes_a_built_in_name(tmp_path: Path) -> None:
    assert main(["compare", BUILTIN, "--modes", "sim", "--out", str(tmp_path)]) == 0


def test_validate_takes_a_built_in_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", BUILTIN, "scale_down"]) == 0
    out = capsys.readouterr().out
    assert f"{BUILTIN}: ok (torchelastic, 3 hosts" in out and "scale_down: ok (static" in out


# -- one direction -----------------------------------------------------------------------

BACKEND_FOLDERS = ("elastic_sim/backends",)


def _python(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def test_no_code_outside_the_backends_switches_on_the_mode() -> None:
    switch = re.compile(r"\bmode\s*(==|!=)|(==|!=)\s*\w*\.?mode\b")
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in _python("elastic_sim", "sim", "real", "reports")
             if not any(p.is_relative_to(ROOT / f) for f in BACKEND_FOLDERS)
             for n, line in enumerate(p.read_text().splitlines(), 1) if switch.search(line)]
    assert found == []


def _imports(path: Path) -> set[str]:
    """Modules a file imports at run time: at the top or inside functions, not for type
    checking only."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for n in ast.walk(node)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_the_tool_s_own_modules_import_in_one_direction() -> None:
    # elastic_sim's own modules (the face: commands, pipeline, campaigns, checks, reports'
    # callers), not the runtimes' packages mapped into it.
    mods = {}
    for p in _python("elastic_sim"):
        parts = [x for x in p.relative_to(ROOT).with_suffix("").parts if x != "__init__"]
        mods[".".join(parts)] = p
    graph = nx.DiGraph()
    for name, path in mods.items():
        graph.add_node(name)
        graph.add_edges_from((name, t) for t in _imports(path) if t in mods and t != name)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []
    campaign = {"elastic_sim.campaign", "elastic_sim.explore", "elastic_sim.sweep",
                "elastic_sim.compare.collect", "elastic_sim.junit", "elastic_sim.case_pool"}
    assert not {t for t in graph.successors("elastic_sim.campaign")} & campaign
