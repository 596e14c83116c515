"""Rounds of different incarnations of the coordinator are different rounds.

A coordinator (the store host, Horovod's driver host) that crashes and comes back
(``crash_restart``) starts its protocol from scratch: a fresh store, a fresh driver, rounds
numbered from the start again. The checks key rounds by their number, so without this a
round 1 of the new incarnation was compared with round 1 of the old one (a false
``membership_agreement``, ``rank_validity``, ``state_agreement``...). Every event recorded
once the coordinator's first process has started again carries its round (and group and
rendezvous id) qualified by the incarnation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from elastic_sim.history import History, history
from elastic_sim.trace import TraceEvent

NUMBERED = ("round", "rendezvous", "group")
"""Fields a coordinator numbers afresh in each incarnation: rounds, rendezvous ids, process
group names (Horovod's ``hvd<round>``)."""


def incarnation_rounds(events: Sequence[TraceEvent]) -> History:
    """The events with each :data:`NUMBERED` field after a restart of the coordinator's
    first process renamed ``"<value> (<coordinator> incarnation <n>)"`` (n = 2, 3, ...); the
    trace as it is when the coordinator never restarted. Training summaries are renamed as
    their steps would be (:meth:`~elastic_sim.history.History.relabelled`)."""
    hist = history(events)
    start = hist.first("run_start")
    coord = start.get("coordinator") if start is not None else None
    main = f"{coord}/main"

    def restart(ev: TraceEvent) -> bool:
        return ev.kind == "proc_start" and ev.proc == main

    if not coord or sum(map(restart, hist.of("proc_start"))) < 2:
        return hist
    return hist.relabelled(restart, lambda ev, starts: _renamed(ev, coord, starts))


def _renamed(ev: TraceEvent, coord: str, starts: int) -> TraceEvent:
    """``ev`` with its numbered fields tagged by incarnation ``starts`` (from the second)."""
    keys = [k for k in NUMBERED if k in ev.data] if starts > 1 else []
    if not keys:
        return ev
    tag = f" ({coord} incarnation {starts})"
    data: Mapping[str, Any] = {**ev.data, **{k: f"{ev.data[k]}{tag}" for k in keys}}
    return replace(ev, data=data)
