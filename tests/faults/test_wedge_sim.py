"""``wedge``: one named activity of a process stuck while the others go on. torchrun's
agent names its main loop ``agent.invoke_run`` and its heartbeat ``keep-alive``; every
process's entry is ``main``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "scale_down.yaml"


def _run(faults: list[dict[str, Any]]) -> tuple[list[TraceEvent], str, Any]:
    return simulate_with(SCENARIO, faults)  # 3 hosts, pg_timeout 30


def _done(events: list[TraceEvent], proc: str) -> float:
    return next(e.t for e in events if e.kind == "job_done" and e.proc == proc)


def test_a_stuck_agent_main_loop_holds_the_exit_barrier_until_it_moves_again() -> None:
    base, _, _ = _run([])
    events, outcome, (rep,) = _run([{"type": "wedge", "host": "h1",
                                     "activity": "agent.invoke_run", "at": 5, "duration": 20}])
    assert rep.fired
    assert _done(base, "h0/main") < 20
    assert _done(events, "h0/main") >= 25  # its exit barrier waits for h1's agent
    # its heartbeat went on: nobody swept h1 out, the world stayed whole
    assert [e.get("world_size") for e in events
            if e.kind == "rdzv_done" and e.proc == "h0/main"] == [3]
    assert outcome == "completed"


def test_a_worker_stuck_with_its_process_alive_is_seen_only_at_the_collective_timeout() -> None:
    at = 9.05
    events, outcome, _ = _run([{"type": "wedge", "host": "h1", "proc": "h1/w0",
                                "activity": "main", "at": at, "duration": 40}])
    first = next(e for e in events if e.kind == "proc_exit" and e.proc == "h0/w0")
    assert "allreduce timed out" in first.get("reason") and first.t - at >= 30
    assert not [e for e in events if e.kind == "proc_exit" and e.proc == "h1/w0"
                and e.t < first.t]  # the stuck worker's process lived on
    assert outcome == "completed"


def test_an_activity_no_process_runs_is_skipped_naming_the_ones_that_run() -> None:
    _, _, (rep,) = _run([{"type": "wedge", "host": "h1", "activity": "nope", "at": 9,
                          "duration": 1}])
    assert not rep.fired and "'nope'" in rep.reason and "keep-alive" in rep.reason
