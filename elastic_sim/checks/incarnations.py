"""Rounds of different incarnations of the coordinator are different rounds.

A coordinator (the store host, Horovod's driver host) that crashes and comes back
(``crash_restart``) starts its protocol from scratch: a fresh store, a fresh driver, rounds
numbered from the start again. The checks key rounds by their number, so without this a
round 1 of the new incarnation was compared with round 1 of the old one (a false
``membership_agreement``, ``rank_validity``, ``state_agreement``...). Every event recorded
once the coordinator's first process has started again carries its round (and group and
rendezvous id) qualified by the incarnation."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from elastic_sim.history import History, history
from elastic_sim.trace import TraceEvent, expand_stretches

NUMBERED = ("round", "rendezvous", "group")
"""Fields a coordinator numbers afresh in each incarnation: rounds, rendezvous ids, process
group names (Horovod's ``hvd<round>``)."""


def incarnation_rounds(events: Sequence[TraceEvent]) -> History:
    """The events with each :data:`NUMBERED` field after a restart of the coordinator's
    first process renamed ``"<value> (<coordinator> incarnation <n>)"`` (n = 2, 3, ...); the
    trace as it is when the coordinator never restarted. A ``train_steps`` summary is
    renamed as its steps would be (its group, its steps' round)."""
    hist = history(events)
    start = hist.first("run_start")
    coord = start.get("coordinator") if start is not None else None
    main = f"{coord}/main"
    restarts = [k for k, ev in zip(hist.keys, hist.plain, strict=True)
                if ev.kind == "proc_start" and ev.proc == main]
    if not coord or len(restarts) < 2:
        return hist
    if any(bisect_left(restarts, st.first_key()) != bisect_left(restarts, st.last_key())
           for st in hist.stretches):  # a stretch across a restart: read step by step
        hist = History(expand_stretches(hist.raw))
    starts, out = 0, list(hist.raw)
    for key, ev in zip(hist.keys, hist.plain, strict=True):  # in the expanded view's order
        if ev.kind == "proc_start" and ev.proc == main:
            starts += 1
        out[key[1]] = _renamed(ev, coord, starts)
    for st in hist.stretches:
        n = bisect_left(restarts, st.first_key())
        fields = dict(st.ev.data.get("fields") or {})
        renamed = _renamed(TraceEvent(0.0, "", "", "", fields), coord, n).data
        ev = _renamed(st.ev, coord, n)
        out[st.r] = replace(ev, data={**ev.data, "fields": renamed}) if renamed is not fields \
            else ev
    return History(out)


def _renamed(ev: TraceEvent, coord: str, starts: int) -> TraceEvent:
    """``ev`` with its numbered fields tagged by incarnation ``starts`` (from the second)."""
    keys = [k for k in NUMBERED if k in ev.data] if starts > 1 else []
    if not keys:
        return ev
    tag = f" ({coord} incarnation {starts})"
    data: Mapping[str, Any] = {**ev.data, **{k: f"{ev.data[k]}{tag}" for k in keys}}
    return replace(ev, data=data)
