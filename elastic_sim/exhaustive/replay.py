"""A small world for a scenario, and its violating paths replayed through the full
simulation: each path's fault becomes the scenario's fault at the point of the scenario's
own run the path's last decision stands for (the event that decision records, and times
spread to the next one: the sim's timings decide which order a time gives), a path
without a fault becomes the fault-free run under several tie seeds. The cases run as a
search does (:func:`elastic_sim.explore.explore` with a fixed list), so what the full
simulation shows is shrunk and reported like any finding.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elastic_sim.cases import Case
from elastic_sim.exhaustive import Move, Path
from elastic_sim.exhaustive.horovod import DriverWorld
from elastic_sim.exhaustive.torchelastic import RendezvousWorld
from elastic_sim.faults.model import (
    CrashHost,
    DiscoveryRemove,
    DiscoveryScriptError,
    Fault,
    HangHost,
)
from elastic_sim.faults.triggers import EventTrigger, Triggered
from elastic_sim.scenario import Scenario
from elastic_sim.trace import TraceEvent

SPREAD = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)
"""Where in the window between the decisions around a fault it is tried (denser near the
first: a store round trip after an event is where the next decision lands)."""
MIN_WINDOW = 0.05
"""Seconds: a shorter window between two decisions' events runs to what they decide."""
OUTCOMES = ("rdzv_complete", "rdzv_done", "hvd_assign", "hvd_trip", "job_done")
"""Events that record what decisions decided."""
TIES = 8
"""Tie seeds a path without a fault is replayed under."""
ANCHORS = {
    "start": ("rdzv_join", 0), "step": ("rdzv_join", 1), "beat": ("rdzv_done", 0),
    "thaw": ("rdzv_join", 1),
    "poll": ("hvd_assign", 0), "trip": ("hvd_trip", 0), "ready": ("hvd_interrupt", 0),
    "progress": ("epoch_log", 0), "finish": ("hvd_job_succeeded", 0),
}
"""A decision -> the event of the scenario's run it stands for, and whether the decision
lies after that event (1: the window runs to the host's next rendezvous event)."""


def world_for(sc: Scenario) -> Any | None:
    """The small world of ``sc``'s protocol and cluster (None: none for that protocol)."""
    knobs = sc.knobs()
    hosts = [h.name for h in sc.cluster.host_specs()]
    if sc.protocol.name == "torchelastic":
        return RendezvousWorld(hosts, int(knobs["min_nodes"]), int(knobs["max_nodes"]),
                               sc.store_host)
    if sc.protocol.name == "horovod":
        disc = knobs.get("discovery") or {}
        lines = disc.get("hosts") if isinstance(disc, dict) else getattr(disc, "hosts", None)
        slots = int(knobs.get("slots_per_host", 1))
        offered = {}
        for line in lines or hosts:
            h, _, n = str(line).partition(":")
            offered[h] = int(n) if n else slots
        driver = str(knobs.get("driver_host") or sc.store_host)
        return DriverWorld(offered, driver, int(knobs.get("np", 1)),
                           int(knobs.get("min_np") or knobs.get("np", 1)),
                           knobs.get("max_np"), knobs.get("reset_limit"))
    return None


@dataclass(frozen=True)
class Replay:
    """A violating path and the cases that replay it in the full simulation."""

    path: Path
    cases: tuple[Case, ...]


def _fault(move: Move, at: float, hang_s: float, fid: str) -> Fault:
    verb, _, arg = move.label.partition(" ")
    if verb == "crash":
        return CrashHost(fid, at, arg)
    if verb == "freeze":
        return HangHost(fid, at, arg, hang_s)
    if verb == "remove":
        return DiscoveryRemove(fid, at, arg)
    return DiscoveryScriptError(fid, 0.0, 0.5)


def _anchor(move: Move, events: Sequence[TraceEvent]) -> TraceEvent | None:
    """The event of the scenario's run that the decision ``move`` records."""
    verb = move.label.split(" ")[0]
    kind, _ = ANCHORS.get(verb, ("", 0))
    host = move.actor.partition(":")[0]
    anyone = verb in ("poll", "trip", "progress", "finish")
    return next((e for e in events if e.kind == kind and (anyone or e.host == host)), None)


def _window(before: Move | None, after: Move | None, events: Sequence[TraceEvent],
            horizon: float) -> tuple[float, float, EventTrigger | None]:
    """The run times between the decisions just before and just after a fault (from the
    start, and a second on, where either has no event), and the event of the first."""
    first = _anchor(before, events) if before is not None else None
    a = first.t if first is not None else 0.0
    nxt = _anchor(after, events) if after is not None else None
    b = nxt.t if nxt is not None else a
    if b - a < MIN_WINDOW:  # the run takes both at once: up to what they decide
        b = next((e.t for e in events if e.t > a + MIN_WINDOW and e.kind in OUTCOMES),
                 min(a + 1.0, max(horizon, a)))
    when = EventTrigger(first.kind, first.host) if first is not None else None
    return a, b, when


def replays(world: Any, paths: Sequence[Path], sc: Scenario,
            events: Sequence[TraceEvent], horizon: float) -> list[Replay]:
    """Every path's cases: its fault at times spread over its decision's window and at the
    decision's event, or the fault-free run under :data:`TIES` tie seeds."""
    knobs = sc.knobs()
    # a freeze long enough to be swept: twice the heartbeat expiry
    hang_s = 2.0 * float(knobs.get("keep_alive_interval", 5.0)) * float(
        knobs.get("keep_alive_max_attempt", 3))
    out = []
    for n, path in enumerate(paths):
        cases: list[Case] = []
        faults = path.faults
        if not faults:
            for k in range(TIES):
                cases.append(Case(0, (), sc.seed, random.Random(f"ties/{n}/{k}")
                                  .randrange(2**32)))
        else:
            fault = faults[0]
            k = path.moves.index(fault)
            decisions = [m for m in path.moves if not m.fault and m.label != "tick"]
            before = [m for m in path.moves[:k] if m in decisions]
            after = [m for m in path.moves[k + 1:] if m in decisions]
            a, b, when = _window(before[-1] if before else None,
                                 after[0] if after else None, events, horizon)
            fid = f"e{n}-{fault.label.split(' ')[0]}"
            for x in SPREAD:
                at = round(a + (b - a) * x, 3)
                case = Case(0, (_fault(fault, at, hang_s, fid),), sc.seed)
                if case not in cases:
                    cases.append(case)
            if when is not None:
                inner = _fault(fault, 0.0, hang_s, fid)
                cases.append(Case(0, (Triggered(fid, 0.0, inner, when),), sc.seed))
        out.append(Replay(path, tuple(cases)))
    return out


__all__ = ["ANCHORS", "SPREAD", "TIES", "Replay", "replays", "world_for"]
