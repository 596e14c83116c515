"""The command line's face: built-in scenario names, ``--version``, ``python -m
elastic_sim``, ``validate`` naming every bad file, internal errors apart from bad input."""

from __future__ import annotations

import json
import re
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


# -- what a person reads, and bad input that names itself (issue 28, item 7) -------------

def test_piped_output_is_never_wrapped(tmp_path: Path) -> None:
    out = tmp_path / ("o" * 150)  # every path it prints is longer than a terminal
    proc = subprocess.run([sys.executable, "-m", "elastic_sim", "run", "scale_down",
                           "--out", str(out), "--no-report"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0
    assert f"Trace: {out / 'trace.jsonl'} (" in proc.stdout  # whole, on one line


def test_checks_that_hold_are_one_line_and_verbose_lists_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "scale_down", "--out", str(tmp_path / "a"), "--no-report"]) == 0
    short = capsys.readouterr().out
    held = next(line for line in short.splitlines() if "(-v: what each examined)" in line)
    assert "membership_agreement, rank_validity" in held
    assert "rounds checked" not in short.split("Checks", 1)[1].split("Contract")[0].replace(
        "nothing to check", "")  # only n/a checks are listed one by one
    assert re.search(r"Checks: \d+ hold, 0 failed, \d+ n/a", short)
    assert re.search(r"lost 5 steps \(\d+ samples\), goodput \d+\.\d %", short)
    assert main(["run", "scale_down", "--out", str(tmp_path / "b"), "--no-report", "-v"]) == 0
    long = capsys.readouterr().out
    assert "membership_agreement: one membership per round" in long and "rounds checked" in long


def test_a_failed_check_is_listed_in_full(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "broken_skip_sync", "--out", str(tmp_path), "--no-report"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"Checks: \d+ hold, 1 failed", out)
    assert "✗ state_agreement:" in out and "kind" not in out.split("✗ state_agreement:")[0]


def test_a_seed_beyond_the_schema_s_bound_is_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "scale_down", "--seed", str(2**64), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --seed: expected a seed in 0..2**64-1") and not \
        (tmp_path / "o").exists()


def test_real_mode_without_torch_is_bad_input_with_the_install_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    import elastic_sim.backends.real as real_backend

    found = importlib.util.find_spec
    monkeypatch.setattr(real_backend.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else found(name, *a))
    for mode in ("real", "torchrun"):
        assert main(["run", "torchelastic/worker_crash", "--mode", mode, "--out",
                     str(tmp_path / mode)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "pip install torch==2.13.0" in err, err
        assert not (tmp_path / mode).exists()


def test_a_host_on_both_sides_of_a_partition_is_bad_input(
        write_scenario: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_scenario("protocol: {name: static}\ncluster: {hosts: 3}\nfaults:\n"
                          "  - {type: partition, at: 1, duration: 2, "
                          "groups: [[h0, h1], [h2, h1]]}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "faults[0].groups[1][1]: host 'h1' is in groups[0] and groups[1]" in err


def test_the_summary_records_the_simulation_s_cpu_time(tmp_path: Path) -> None:
    assert main(["run", "scale_down", "--out", str(tmp_path), "--quiet", "--no-report"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert 0 < summary["cpu_s"] <= summary["wall_s"] + 0.05  # the backend's run alone
