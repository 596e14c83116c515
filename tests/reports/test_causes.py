"""Blaming failures on faults: what the survivors saw names the dead peer or the cut."""

from __future__ import annotations

from typing import Any

from elastic_sim.reports.causes import cause_of, detections, fault_hits, observations
from elastic_sim.trace import TraceEvent


def ev(t: float, host: str, kind: str, proc: str | None = None, **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def fault(t: float, fid: str, ftype: str, target: Any, phase: str = "start") -> TraceEvent:
    host = target if isinstance(target, str) else "*"
    return ev(t, host, "fault", "fault-injector", id=fid, type=ftype, target=target, phase=phase)


def world(n: int = 3) -> list[TraceEvent]:
    """Round 0 of ``n`` hosts, its group formed at 0.1 s."""
    hosts = [f"h{i}" for i in range(n)]
    out = [ev(0.0, h, "rdzv_done", round=0, members=hosts, rank=i) for i, h in enumerate(hosts)]
    return out + [ev(0.1, h, "group_init", group="round0", rank=i, size=n)
                  for i, h in enumerate(hosts)]


def failed(t: float, host: str, error: str, peer: int | None = None) -> list[TraceEvent]:
    """``host`` enters collective 5 at 0.9 s and it fails at ``t``."""
    extra = {} if peer is None else {"peer": peer}
    return [ev(0.9, host, "coll_enter", group="round0", seq=5, op="allreduce"),
            ev(t, host, "coll_fail", group="round0", seq=5, op="allreduce", error=error,
               **extra)]


def blame(events: list[TraceEvent]) -> dict[str, float]:
    return {fid: obs.t for fid, obs in detections(events, fault_hits(events)).items()}


def test_a_failure_naming_a_dead_peer_is_blamed_on_the_crash_of_that_peer_not_another() -> None:
    events = [*world(), fault(1.0, "crash-h1", "crash", "h1"),
              fault(1.5, "crash-h2", "crash", "h2"), *failed(2.0, "h0", "CollectiveFailed", 2)]
    assert blame(events) == {"crash-h2": 2.0}
    events[-1] = ev(2.0, "h0", "coll_fail", group="round0", seq=5, op="allreduce",
                    error="CollectiveFailed", peer=1)
    assert blame(events) == {"crash-h1": 2.0}


def test_a_peer_that_ended_before_the_fault_was_not_killed_by_it() -> None:
    """h2's process exits on its own at 1.0 s; the crash of its host at 1.5 s cannot be why
    h0's collective lost it."""
    events = [*world(), ev(1.0, "h2", "proc_exit", code=1, reason="returned"),
              fault(1.5, "crash-h2", "crash", "h2"), *failed(2.0, "h0", "CollectiveFailed", 2)]
    assert blame(events) == {}
    crash = events.index(next(e for e in events if e.kind == "fault"))
    events[crash] = fault(0.95, "crash-h2", "crash", "h2")  # now it came first
    assert blame(sorted(events, key=lambda e: e.t)) == {"crash-h2": 2.0}


def test_a_timeout_is_blamed_on_the_cut_between_the_waiter_and_a_member() -> None:
    cut = [["h2"], ["h0", "h1"]]
    events = [*world(), fault(1.0, "cut-h2", "partition", cut),
              *failed(6.0, "h0", "CollectiveTimeout")]
    assert blame(events) == {"cut-h2": 6.0}
    # a death is not explained by a cut
    events[-1] = ev(6.0, "h0", "coll_fail", group="round0", seq=5, op="allreduce",
                    error="CollectiveFailed", peer=2)
    assert blame(events) == {}


def test_a_hang_that_healed_before_the_call_began_does_not_explain_its_timeout() -> None:
    events = [*world(), fault(0.2, "hang-h1", "hang", "h1"),
              fault(0.5, "hang-h1", "hang", "h1", phase="heal"),
              *failed(6.0, "h0", "CollectiveTimeout")]
    (obs,) = observations(events)
    assert obs.since == 0.9 and cause_of(obs, fault_hits(events)) is None
    heal = events.index(next(e for e in events if e.get("phase") == "heal"))
    events[heal] = fault(0.95, "hang-h1", "hang", "h1", phase="heal")
    assert blame(sorted(events, key=lambda e: e.t)) == {"hang-h1": 6.0}
