"""Rounds of different incarnations of the coordinator are different rounds.

A coordinator (the store host, Horovod's driver host) that crashes and comes back
(``crash_restart``) starts its protocol from scratch: a fresh store, a fresh driver, rounds
numbered from the start again. The checks key rounds by their number, so without this a
round 1 of the new incarnation was compared with round 1 of the old one (a false
``membership_agreement``, ``rank_validity``, ``state_agreement``...). Every event recorded
once the coordinator's first process has started again carries its round (and group and
rendezvous id) qualified by the incarnation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from elastic_sim.trace import TraceEvent

NUMBERED = ("round", "rendezvous", "group")
"""Fields a coordinator numbers afresh in each incarnation: rounds, rendezvous ids, process
group names (Horovod's ``hvd<round>``)."""


def incarnation_rounds(events: Sequence[TraceEvent]) -> list[TraceEvent]:
    """The events with each :data:`NUMBERED` field after a restart of the coordinator's
    first process renamed ``"<value> (<coordinator> incarnation <n>)"`` (n = 2, 3, ...); the
    trace as it is when the coordinator never restarted."""
    start = next((e for e in events if e.kind == "run_start"), None)
    coord = start.get("coordinator") if start is not None else None
    if not coord:
        return list(events)
    main, starts, out = f"{coord}/main", 0, []
    for ev in events:
        if ev.kind == "proc_start" and ev.proc == main:
            starts += 1
        keys = [k for k in NUMBERED if k in ev.data] if starts > 1 else []
        if keys:
            tag = f" ({coord} incarnation {starts})"
            ev = replace(ev, data={**ev.data, **{k: f"{ev.data[k]}{tag}" for k in keys}})
        out.append(ev)
    return out
