"""The wheel a user installs: one top-level package, the scenarios inside it, ``py.typed``;
in a fresh virtual environment (no system site-packages, no torch), ``elastic-sim run
scale_down`` and ``elastic-sim scenarios`` work from a directory outside the repository,
and the pytest plugin is found through its entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from elastic_sim import __version__
from tests.conftest import ROOT, SCENARIOS

pytestmark = pytest.mark.slow

SKIP = shutil.ignore_patterns(".venv", "venv", "runs", "out", "build", "*.egg-info",
                              "__pycache__", ".git", ".hypothesis", ".*_cache")


def _sh(argv: list[str | Path], cwd: Path, timeout: float = 900) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{argv}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the repository."""
    src = tmp_path_factory.mktemp("src") / "elastic-sim"
    shutil.copytree(ROOT, src, symlinks=True, ignore=SKIP)
    out = tmp_path_factory.mktemp("dist")
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src], cwd=src)
    (whl,) = out.glob("elastic_sim-*.whl")
    return whl


def test_the_wheel_has_one_top_level_package_with_its_scenarios(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"elastic_sim", f"elastic_sim-{__version__}"
                                                ".dist-info"}
    shipped = {n.removeprefix("elastic_sim/scenarios/") for n in names
               if n.startswith("elastic_sim/scenarios/") and not n.endswith(".py")}
    expected = {p.relative_to(SCENARIOS).as_posix() for p in SCENARIOS.rglob("*")
                if p.is_file() and p.suffix in (".yaml", ".md", ".json")}
    assert shipped == expected
    assert "elastic_sim/py.typed" in names
    docs = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert docs >= {"writing-a-protocol.md", "trace-events.md"}
    assert {f"elastic_sim/docs/{d}" for d in docs} <= set(names)
    for sub in ("sim", "real", "protocols", "faults", "reports", "checks"):
        assert f"elastic_sim/{sub}/__init__.py" in names
    entry_points = zipfile.ZipFile(wheel).read(
        f"elastic_sim-{__version__}.dist-info/entry_points.txt").decode()
    assert "elastic-sim = elastic_sim.cli:main" in entry_points
    assert "[pytest11]" in entry_points


def test_a_fresh_venv_from_the_wheel_runs_builtin_scenarios_anywhere(
        wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    bin_dir = env_dir / "bin"
    _sh([bin_dir / "python", "-m", "pip", "install", "-q", wheel, "pytest"], cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    _sh([bin_dir / "elastic-sim", "run", "scale_down", "--no-report"], cwd=elsewhere)  # exit 0
    summary = json.loads((elsewhere / "runs" / "scale_down-sim-s0" / "summary.json").read_text())
    assert summary["verdict"] == "pass" and summary["scenario"]["name"] == "scale_down"

    listing = _sh([bin_dir / "elastic-sim", "scenarios"], cwd=elsewhere).splitlines()
    assert any(line.startswith("scale_down  [static]") for line in listing)
    assert len(listing) == len(list(SCENARIOS.rglob("*.yaml")))
    assert not any("INVALID" in line for line in listing)

    version = _sh([bin_dir / "python", "-m", "elastic_sim", "--version"], cwd=elsewhere)
    assert version.strip() == f"elastic-sim {__version__}"

    where = _sh([bin_dir / "python", "-c", "import elastic_sim, pathlib; "
                 "print(pathlib.Path(elastic_sim.__file__).parent)"], cwd=elsewhere).strip()
    assert where.startswith(str(env_dir)), where  # the wheel's copy, not this checkout
    assert (Path(where) / "py.typed").is_file()

    # the pytest plugin, found through its entry point (no -p)
    (elsewhere / "sc").mkdir()
    shutil.copy(SCENARIOS / "hang_heals.yaml", elsewhere / "sc" / "hang_heals.yaml")
    res = _sh([bin_dir / "python", "-m", "pytest", "--elastic-sim", "sc", "-q",
               "-p", "no:cacheprovider"], cwd=elsewhere)
    assert "1 passed" in res
