"""A fault's trace record: the one encoder of ``fault`` events both runtimes use, and the
one reader that derives from the trace which scheduled faults fired (and why the others
did not).

A ``fault`` event is on the fault's host (``*``: no one host), process
:data:`INJECTOR`, with data ``id``, ``type``, ``target``, ``phase`` (``start``, ``heal``
or ``skipped``), then ``reason`` when there is one, then what the runtime adds (the
``trigger`` of a triggered fault). A fault fired if its first ``start``/``skipped`` event
is a start; a skipped one did not, for the event's reason; one with no such event did not
fire because the run ended first, or its trigger never happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.faults.triggers import Triggered, unwrap
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport

INJECTOR = "fault-injector"
"""The ``proc`` of fault events."""


def fault_event(f: Fault, phase: str, reason: str = "",
                extra: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The host and data of the trace event for ``f`` entering ``phase``."""
    acting = unwrap(f)
    data: dict[str, Any] = {"id": f.id, "type": acting.type, "target": acting.target(),
                            "phase": phase}
    if reason:
        data["reason"] = reason
    if extra:
        data.update(extra)
    return acting.where(), data


class FaultLedger:
    """Reads ``fault`` events as they are traced; reports on a schedule from them."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[float, str, str]] = {}
        """Fault id -> (time, phase, reason) of its first start or skipped event."""

    def observe(self, ev: TraceEvent) -> None:
        """See one trace event (only the injector's ``fault`` events matter)."""
        if ev.kind != "fault" or ev.proc != INJECTOR:
            return
        phase = ev.data.get("phase")
        fid = ev.data.get("id")
        if phase in ("start", "skipped") and isinstance(fid, str) and fid not in self._first:
            self._first[fid] = (ev.t, str(phase), str(ev.data.get("reason", "")))

    def fired(self, fid: str) -> bool:
        """Whether fault ``fid`` has started."""
        first = self._first.get(fid)
        return first is not None and first[1] == "start"

    def reports(self, schedule: Sequence[Fault], end: float) -> list[FaultReport]:
        """One report per scheduled fault, in schedule order."""
        out = []
        for f in schedule:
            first = self._first.get(f.id)
            rep = FaultReport(id=f.id, type=unwrap(f).type, fired=False)
            if first is not None and first[1] == "start":
                rep.fired, rep.at = True, first[0]
            elif first is not None:
                rep.reason = first[2]
            elif isinstance(f, Triggered) and f.when is not None and f.at <= end:
                rep.reason = f"its trigger {f.when.describe()} never happened"
            else:
                rep.reason = f"after the run ended (at {end:g}s)"
            out.append(rep)
        return out
