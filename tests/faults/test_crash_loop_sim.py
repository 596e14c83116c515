"""``crash_loop``: the bad node whose processes fail at start-up. Under torchrun, the bad
node's agent spends max_restarts on it (upstream's agent restarts a FAILED group while
restarts remain), then fails and launch_agent closes the rendezvous, ending the job; with
a bounded loop (``starts``) the job gets through once it stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "worker_crash.yaml"


def _run(fault: dict[str, Any]) -> tuple[list[TraceEvent], str]:
    events, outcome, (rep,) = simulate_with(SCENARIO, [fault])  # 2 hosts, max_restarts 3
    assert rep.fired, rep
    return events, outcome


def _start_failures(events: list[TraceEvent], host: str) -> int:
    return sum(1 for e in events if e.kind == "proc_exit" and e.host == host
               and "CrashAtStart" in str(e.get("reason")))


def test_a_node_whose_workers_always_fail_at_start_up_uses_up_the_restarts_and_ends_the_job(
) -> None:
    events, outcome = _run({"type": "crash_loop", "host": "h1", "at": 0})
    assert _start_failures(events, "h1") == 4  # the first start and max_restarts 3
    assert _start_failures(events, "h0") == 0
    restarts = [e.get("remaining_restarts") for e in events
                if e.kind == "agent_restart" and e.proc == "h1/main"]
    assert restarts == [2, 1, 0]
    (failed,) = [e for e in events if e.kind == "job_failed" and e.proc == "h1/main"]
    assert "ChildFailedError" in failed.get("error")
    assert [e.get("closed") for e in events
            if e.kind == "rdzv_shutdown" and e.proc == "h1/main"] == [True]
    assert outcome == "failed"


def test_a_crash_loop_of_two_starts_costs_two_restarts_and_the_job_completes() -> None:
    events, outcome = _run({"type": "crash_loop", "host": "h1", "at": 0, "starts": 2})
    assert _start_failures(events, "h1") == 2
    assert outcome == "completed"


def test_an_agent_that_fails_at_start_up_leaves_the_other_below_min_nodes_until_join_timeout(
) -> None:
    events, outcome = _run({"type": "crash_loop", "host": "h1", "at": 0, "to": "agent"})
    assert _start_failures(events, "h1") == 1
    assert not [e for e in events if e.kind == "proc_start" and e.proc == "h1/w0"]
    (failed,) = [e for e in events if e.kind == "job_failed" and e.proc == "h0/main"]
    assert "RendezvousTimeoutError" in failed.get("error") and failed.t >= 60  # join_timeout
    assert outcome == "failed"


def test_a_crash_loop_of_the_agent_spares_an_agent_that_already_runs() -> None:
    events, outcome = _run({"type": "crash_loop", "host": "h1", "at": 0.001, "to": "agent"})
    assert _start_failures(events, "h1") == 0
    assert outcome == "completed"
