"""A run cannot hang the tool: a busy loop at one instant is a livelock (a finding, exit 1,
with the spinning processes as witnesses); a run past the wall-clock or memory guard is
stopped with its own outcome, keeping what was traced so far; explore counts both as
findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.explore import Case, run_case
from elastic_sim.guards import RunGuard, rss_bytes
from elastic_sim.pipeline import execute
from elastic_sim.scenario import Scenario
from elastic_sim.spec import compile_spec
from elastic_sim.testing import load, variant

ROOT = Path(__file__).resolve().parents[2]


def _variant(name: str) -> Scenario:
    return variant(load(ROOT / "scenarios" / "scale_down.yaml"), name,
                   f"tests.bounds.entries:{name}")


def _summary(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "summary.json").read_text())
    return data


def _kinds(out: Path) -> list[str]:
    return [json.loads(line)["kind"] for line in (out / "trace.jsonl").read_text().splitlines()]


def test_a_busy_loop_at_one_instant_is_a_livelock_finding_with_witnesses(
        tmp_path: Path) -> None:
    report = execute(compile_spec(_variant("spin"), seed=0), tmp_path)
    assert report.exit_code == 1
    assert report.result.stopped == "livelock"
    assert report.result.end_time == pytest.approx(0.5001)  # where time stopped, not 600 s
    check = next(c for c in report.checks if c.name == "time_advances")
    assert not check.ok
    witness = check.violations[0].witness
    assert witness[-1].kind == "run_stopped"
    assert {e.proc for e in witness if e.kind == "spin_start"} >= {"h0/main", "h1/main"}
    assert "h0/main:main" in check.violations[0].message
    summary = _summary(tmp_path)
    assert summary["verdict"] == "fail" and summary["stopped"] == "livelock"
    assert _kinds(tmp_path)[-2:] == ["run_stopped", "run_end"]
    # the time_limit check does not claim a hang at the time limit
    assert next(c for c in report.checks if c.name == "terminates").ok


def test_the_wall_limit_stops_a_long_run_keeping_its_trace(tmp_path: Path) -> None:
    report = execute(compile_spec(_variant("crawl"), seed=0), tmp_path,
                          guard=RunGuard(wall_limit=1.0))
    assert report.result.stopped == "wall_limit"
    assert 0 < report.result.end_time < 600
    summary = _summary(tmp_path)
    assert summary["verdict"] == "stopped" and summary["exit_code"] == 1
    assert summary["stopped"] == "wall_limit"
    guard = next(c for c in report.checks if c.name == "within_run_guards")
    assert not guard.ok and "--wall-limit" in guard.violations[0].message
    kinds = _kinds(tmp_path)
    assert "crawl_start" in kinds and kinds[-2:] == ["run_stopped", "run_end"]


def test_the_memory_limit_stops_a_growing_run(tmp_path: Path) -> None:
    limit = rss_bytes() + (80 << 20)
    report = execute(compile_spec(_variant("hoard"), seed=0), tmp_path,
                          guard=RunGuard(wall_limit=300.0, memory_limit=limit))
    assert report.result.stopped == "memory_limit"
    assert _summary(tmp_path)["verdict"] == "stopped"
    assert "hoard_start" in _kinds(tmp_path)


def test_a_normal_run_is_not_stopped(tmp_path: Path) -> None:
    report = execute(compile_spec(load(ROOT / "scenarios" / "scale_down.yaml"), seed=0),
                     tmp_path, guard=RunGuard(wall_limit=300.0))
    assert report.exit_code == 0 and report.result.stopped == ""
    assert _summary(tmp_path)["stopped"] is None
    assert all(c.ok for c in report.checks if c.name in ("time_advances",
                                                         "within_run_guards"))


def test_explore_counts_a_livelock_as_a_finding() -> None:
    sc = _variant("spin")
    out = run_case(sc, Case(0, (), 0, None))
    assert [s.check for s in out.signatures] == ["time_advances"]
    assert out.hung


def test_the_watchdog_stops_a_step_that_never_returns(tmp_path: Path) -> None:
    report = execute(compile_spec(_variant("block"), seed=0), tmp_path,
                          guard=RunGuard(wall_limit=1.0))
    assert report.result.stopped == "wall_limit"
    kinds = _kinds(tmp_path)
    assert "block_start" in kinds and kinds[-2:] == ["run_stopped", "run_end"]


# -- a stop that always leaves the trace and summary (issue 34, item 4) -------------------

def test_a_watchdog_that_would_interrupt_again_stops_the_run_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second interrupt landing while the first is handled ended the command with exit
    130 and nothing written; the watchdog interrupts once, however often it looks."""
    import time

    import elastic_sim.guards as guards

    class SlowToAnswer(RunGuard):
        """Answers slowly once tripped, as a loaded machine does: the kernel asks it while
        it handles the first interrupt."""

        def __call__(self) -> tuple[str, str] | None:
            found = super().__call__()
            if found is not None:
                time.sleep(0.02)
            return found

    monkeypatch.setattr(guards, "WATCH_PERIOD", 0.001)
    for i in range(3):
        out = tmp_path / f"r{i}"
        report = execute(compile_spec(_variant("block"), seed=0), out,
                         guard=SlowToAnswer(wall_limit=0.3))
        assert report.result.stopped == "wall_limit"
        assert _summary(out)["stopped"] == "wall_limit"
        assert _kinds(out)[-2:] == ["run_stopped", "run_end"]


BUSY = ROOT / "tests" / "data" / "busy.yaml"


@pytest.mark.slow
def test_a_run_past_its_wall_limit_ends_within_10_percent_of_it_with_trace_and_summary(
        tmp_path: Path) -> None:
    """A run that traces as fast as the sim goes, for longer than the limit: the command
    ends within 10 % of the limit (it overshot 2.2 times), its trace and summary written
    and its reports left for ``elastic-sim report``."""
    import subprocess
    import sys
    import time

    path = BUSY
    limit = 20.0
    for i in range(2):
        out = tmp_path / f"out{i}"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "elastic_sim", "run", str(path), "--out",
                               str(out), "--wall-limit", str(limit), "--quiet"],
                              capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
        assert proc.returncode == 1, proc.stderr
        assert took <= limit * 1.1, took
        summary = _summary(out)
        assert summary["verdict"] == "stopped" and summary["stopped"] == "wall_limit"
        assert _kinds(out)[-2:] == ["run_stopped", "run_end"]
        guard = next(c for c in summary["checks"] if c["name"] == "within_run_guards")
        assert guard["status"] == "fail"
        assert "reports not written" in proc.stderr
