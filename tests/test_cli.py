"""The command line's face: built-in scenario names, ``--version``, ``python -m
elastic_sim``, ``validate`` naming every bad file, internal errors apart from bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elastic_sim import __version__
from elastic_sim.builtin import builtin_names, scenario_path
from elastic_sim.cli import main
from tests.conftest import ROOT, SCENARIOS

GOOD = "protocol: {name: static}\ncluster: {hosts: 2}\nworkload: {steps: 5}\n"


def test_version_and_python_dash_m(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "elastic_sim", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"elastic-sim {__version__}"


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_builtin_name_runs_from_another_directory(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # no scenarios/ here
    assert main(["run", "scale_down", "--quiet", "--no-report"]) == 0
    assert "PASS runs/scale_down-sim-s0" in capsys.readouterr().out
    assert (tmp_path / "runs" / "scale_down-sim-s0" / "summary.json").is_file()


def test_builtin_names_cover_the_shipped_scenarios() -> None:
    names = builtin_names()
    assert len(names) == len(list(SCENARIOS.rglob("*.yaml")))
    assert "scale_down" in names and "torchelastic/worker_crash" in names
    assert scenario_path("torchelastic/worker_crash").samefile(
        SCENARIOS / "torchelastic" / "worker_crash.yaml")
    assert scenario_path("scale_down.yaml").name == "scale_down.yaml"


def test_a_file_wins_over_a_builtin_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    Path("scale_down").write_text(GOOD)
    assert scenario_path("scale_down") == Path("scale_down")


def test_an_unknown_name_is_bad_input_with_a_suggestion(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "scale_dwn"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no such file or built-in scenario" in err and "did you mean 'scale_down'" in err
    assert not (tmp_path / "runs").exists()
    assert main(["run", "../scale_down"]) == 2  # names never leave the scenarios folder


def test_scenarios_lists_the_builtins_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(builtin_names())
    assert any(line.startswith("scale_down  [static] ") for line in lines)
    assert not any("INVALID" in line for line in lines)


def test_validate_names_every_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    typo = tmp_path / "typo.yaml"
    typo.write_text(GOOD.replace("steps", "stpes"))
    host = tmp_path / "host.yaml"
    host.write_text(GOOD + "faults: [{type: crash, host: h7, at: 1}]\n")
    rc = main(["validate", str(typo), str(good), str(host), str(tmp_path / "missing.yaml")])
    out, err = capsys.readouterr()
    assert rc == 2
    lines = err.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines[:3]] == [
        str(typo), str(host), str(tmp_path / "missing.yaml")]
    assert "workload.stpes" in lines[0] and "faults[0].host" in lines[1]
    assert lines[3] == "3 of 4 files invalid"
    assert f"{good}: ok" in out


def test_internal_error_exits_3_with_a_traceback_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import elastic_sim.pipeline

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(elastic_sim.pipeline, "execute", broken)
    rc = main(["run", str(SCENARIOS / "scale_down.yaml"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 3
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "internal error: RuntimeError: simulated bug" in err
    path = Path(err.split("traceback: ")[1].rstrip(")"))
    try:
        text = path.read_text()
        assert "Traceback" in text and "simulated bug" in text and "def broken" not in err
        assert "in broken" in text
    finally:
        path.unlink()


def test_bad_input_still_exits_2_not_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("static", "statc"))
    assert main(["run", str(bad)]) == 2


def test_every_subcommand_prints_its_help() -> None:
    """`elastic-sim CMD --help` renders for every subcommand (a stray '%' in a help text made
    argparse raise TypeError instead of printing the help)."""
    import argparse
    import contextlib
    import io

    from elastic_sim.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"run", "explore", "sweep", "compare"} <= set(sub.choices)
    for name, sp in sub.choices.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            sp.print_help()
        assert "usage:" in out.getvalue(), name
