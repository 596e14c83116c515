"""``signal``: a named signal to a host's agent or workers; torchrun's model reacts as
upstream's handlers do (torch/distributed/elastic/multiprocessing/api.py registers
SIGTERM, SIGINT, SIGHUP, SIGQUIT when workers start; launch_agent closes the rendezvous
on anything but a SignalException; Python turns an early SIGINT into KeyboardInterrupt)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "scale_down.yaml"


def _run(fault: dict[str, Any]) -> tuple[list[TraceEvent], str]:
    events, outcome, (rep,) = simulate_with(SCENARIO, [fault])
    assert rep.fired, rep
    return events, outcome


def _of(events: list[TraceEvent], kind: str, proc: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.kind == kind and e.proc == proc]


def test_an_interrupt_during_the_first_rendezvous_closes_it_and_fails_the_job() -> None:
    events, outcome = _run({"type": "signal", "host": "h1", "signal": "INT", "at": 0.3})
    assert _of(events, "job_failed", "h1/main") == [{"error": "KeyboardInterrupt"}]
    assert _of(events, "rdzv_shutdown", "h1/main") == [{"closed": True}]
    assert _of(events, "proc_exit", "h1/main")[0]["code"] == 130
    assert "RendezvousClosedError" in _of(events, "job_failed", "h0/main")[0]["error"]
    assert outcome == "failed"


def test_a_hangup_after_workers_start_is_a_signal_exception_that_keeps_the_rendezvous() -> None:
    events, outcome = _run({"type": "signal", "host": "h1", "signal": "HUP", "at": 6})
    assert _of(events, "agent_signal", "h1/main") == [{"signal": "HUP"}]
    assert "SignalException" in _of(events, "job_failed", "h1/main")[0]["error"]
    assert _of(events, "rdzv_shutdown", "h1/main") == []  # not closed: others scale down
    assert [e["world_size"] for e in _of(events, "rdzv_done", "h0/main")] == [3, 2]
    assert outcome == "completed"


def test_an_unhandled_signal_ends_the_agent_by_its_default_action() -> None:
    events, outcome = _run({"type": "signal", "host": "h1", "signal": "USR1", "at": 6})
    assert _of(events, "proc_exit", "h1/main") == [{"code": -10, "reason": "killed by SIGUSR1"}]
    assert _of(events, "job_failed", "h1/main") == []
    assert outcome == "completed"


def test_a_signal_to_the_workers_is_a_worker_failure_the_agent_restarts() -> None:
    events, outcome = _run({"type": "signal", "host": "h1", "signal": "TERM", "to": "workers",
                            "at": 6})
    assert _of(events, "proc_exit", "h1/w0")[0]["code"] == -15
    assert _of(events, "agent_restart", "h1/main")[0]["reason"] == "FAILED"
    assert _of(events, "proc_exit", "h1/main") == [{"code": 0, "reason": "returned"}]
    assert outcome == "completed"
