"""The house as installed: the repository's top-level folders are the subpackages of
``elastic_sim`` through setuptools' ``package-dir`` mapping, with no link anywhere and no
second importable copy of a module; a traceback names the real file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import elastic_sim
from tests.conftest import ROOT

MAPPED = ("sim", "protocols", "faults", "real", "reports", "scenarios", "docs")
BARE_IMPORT = re.compile(rf"^\s*(import|from)\s+({'|'.join(MAPPED)})(\.|\s|,|$)", re.M)


def _setuptools() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        config: dict[str, dict[str, dict[str, object]]] = tomllib.load(fh)
    return config["tool"]["setuptools"]


def test_no_file_in_the_repository_is_a_symbolic_link() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert [line for line in staged if line.startswith("120000")] == []
    assert not [p for p in (ROOT / "elastic_sim").iterdir() if p.is_symlink()]


def test_every_folder_with_modules_is_an_installed_package() -> None:
    dirs: dict[str, str] = _setuptools()["package-dir"]  # type: ignore[assignment]
    listed = set(_setuptools()["packages"])  # type: ignore[call-overload]
    found = set()
    for package, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *rel)))
    assert listed == found
    assert set(dirs) == {"elastic_sim", *(f"elastic_sim.{m}" for m in MAPPED)}


def test_no_code_imports_a_top_level_folder_by_its_bare_name() -> None:
    files = [p for top in (*MAPPED, "elastic_sim", "tests", "benchmarks", "scripts")
             for p in (ROOT / top).rglob("*.py")]
    bare = [f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()}"
            for p in files for text in [p.read_text(encoding="utf-8")]
            for m in BARE_IMPORT.finditer(text)]
    assert bare == []


@pytest.mark.parametrize("name", ["sim", "protocols.api", "real", "faults.model", "reports"])
def test_a_bare_import_from_the_repository_root_is_refused(name: str) -> None:
    proc = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    top = name.split(".")[0]
    assert f"ImportError: {top} is installed as elastic_sim.{top}" in proc.stderr


def test_a_traceback_from_the_installed_package_names_the_real_file(tmp_path: Path) -> None:
    # From outside the repository: the installed package, as a user imports it.
    code = ("import traceback\n"
            "from elastic_sim.faults.schedule import FaultSpace\n"
            "try:\n"
            "    FaultSpace(hosts=(), horizon=1.0)\n"
            "except ValueError as exc:\n"
            "    print(traceback.extract_tb(exc.__traceback__)[-1].filename)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    named = Path(proc.stdout.strip())
    assert named == ROOT / "faults" / "schedule.py"
    assert not named.is_symlink() and named.resolve() == named
    assert Path(elastic_sim.__file__).parent == ROOT / "elastic_sim"


def test_the_architecture_guide_names_files_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)+(?:[a-z_]+\.(?:py|md))?)`", text))
    assert len(named) > 20
    missing = sorted(n for n in named
                     if not (ROOT / n).exists() and not (ROOT / "elastic_sim" / n).exists()
                     and not n.startswith("protocols/<"))
    assert missing == []


@pytest.mark.slow
def test_the_readme_s_fast_lane_count_is_what_pytest_collects() -> None:
    # scripts/fast_lane_figures.py writes the README's figures; --check holds the count.
    proc = subprocess.run([sys.executable, "scripts/fast_lane_figures.py", "--check"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_runs_exactly_the_readme_s_test_command() -> None:
    """The README opens with two commands; ``.ci/run`` calls the second, the test
    command, exactly (so a new user's command is what CI proves)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)\n```", readme, flags=re.S)
    run_main, run_tests = blocks[0], blocks[1]
    assert "elastic-sim run scenarios/scale_down.yaml" in run_main
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if ln.startswith("python3 -m venv")]
    assert ci == [run_tests]
