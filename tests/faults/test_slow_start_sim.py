"""``slow_start``: one host's processes take longer to start. Under torchrun a worker that
starts later than its peers' pg_timeout never joins their group: the fast host's workers
time out in init and spend its restarts (upstream's agent counts a FAILED group)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "worker_crash.yaml"


def _run(faults: list[dict[str, Any]]) -> tuple[list[TraceEvent], str]:
    events, outcome, reports = simulate_with(SCENARIO, faults)  # 2 hosts, pg_timeout 30
    assert all(r.fired for r in reports)
    return events, outcome


def _starts(events: list[TraceEvent], proc: str) -> list[float]:
    return [e.t for e in events if e.kind == "proc_start" and e.proc == proc]


def _first_step(events: list[TraceEvent]) -> float:
    return next(e.t for e in events if e.kind == "step")


def test_a_slower_start_within_the_timeout_only_delays_the_first_step() -> None:
    base, _ = _run([])
    slow, outcome = _run([{"type": "slow_start", "host": "h1", "delay": 5, "at": 0.001}])
    assert _first_step(slow) - _first_step(base) >= 5 - 0.01
    assert _starts(slow, "h1/w0") == _starts(base, "h1/w0")  # it exists, still starting
    assert outcome == "completed"


def test_a_start_slower_than_pg_timeout_makes_the_fast_host_spend_its_restarts() -> None:
    events, outcome = _run([{"type": "slow_start", "host": "h1", "delay": 40, "at": 0.001}])
    inits = [e for e in events if e.kind == "proc_exit" and e.proc == "h0/w0"]
    assert len(inits) == 4 and all("init timed out" in e.get("reason") for e in inits)
    assert not [e for e in events if e.kind == "step"]
    assert outcome == "failed"
