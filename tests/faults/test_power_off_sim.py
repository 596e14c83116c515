"""``power_off``: a machine that stops dead. No FIN or RST leaves it, so peers learn
nothing: their collectives with it time out (pg_timeout) and their store calls to it end on
the clients' own timeouts (a read's, TCP's retransmission), where a ``crash`` (the
process-death case) is seen within a fraction of a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "scale_down.yaml"


def _run(fault: dict[str, Any], time_limit: float = 300) -> tuple[list[TraceEvent], str]:
    # 3 hosts, store on h0, pg_timeout 30
    events, outcome, (rep,) = simulate_with(SCENARIO, [fault], time_limit=time_limit)
    assert rep.fired, rep
    return events, outcome


def _worker_failures(events: list[TraceEvent]) -> list[tuple[float, str]]:
    return [(e.t, str(e.get("reason"))) for e in events
            if e.kind == "proc_exit" and e.proc in ("h0/w0", "h1/w0") and e.get("code") == 1]


def test_peers_of_a_powered_off_host_wait_for_the_collective_timeout() -> None:
    at = 9.05
    crashed, _ = _run({"type": "crash", "host": "h2", "at": at})
    off, outcome = _run({"type": "power_off", "host": "h2", "at": at})
    assert all(t - at < 1 and "a peer died" in why for t, why in _worker_failures(crashed))
    failures = _worker_failures(off)
    assert len(failures) == 2
    assert all(t - at >= 30 and "timed out" in why for t, why in failures)  # pg_timeout
    assert [(e.get("code"), e.get("reason")) for e in off
            if e.kind == "proc_exit" and e.host == "h2"] == [(-9, "powered off")] * 2
    assert outcome == "completed"  # the survivors scale down, only later


def test_store_calls_to_a_powered_off_store_host_end_on_the_clients_timeouts() -> None:
    crashed, crash_outcome = _run({"type": "crash", "host": "h0", "at": 9.05}, 120)
    assert crash_outcome == "failed"
    assert any("is gone" in str(e.get("error")) for e in crashed if e.kind == "job_failed")
    off, outcome = _run({"type": "power_off", "host": "h0", "at": 9.05}, 400)
    failed = [e for e in off if e.kind == "job_failed"]
    # each agent's next rendezvous read waits out its read_timeout (60 s) twice: no answer
    # comes, but the agents end with a connection error instead of hanging
    assert {e.host for e in failed} == {"h1", "h2"}
    assert all(e.t > 9.05 + 60 and "RendezvousConnectionError" in str(e.get("error"))
               and "timeout" in str(e.get("error")) for e in failed)
    assert outcome == "failed"
