"""Which fault caused which failure, read causally from the trace.

A survivor's failure names a culprit: a collective that failed because a peer died names
that peer (``coll_fail``/``group_failed`` with ``peer``), which a fault after that peer's
process had ended cannot explain; one that timed out, or a store wait
or rendezvous that timed out, names the members it waited for (and the waiter itself, which
may have been the frozen one); an agent that saw its own worker fail names its own host; a
Horovod driver that blacklists a host or fails to reach it names it; a store client whose
server is gone names the store's host (where the error says which). A fault explains an
observation when it hit a culprit (a host fault on the culprit's host, a cut between the
observer and a culprit), started before it, and was still active while the failing call
waited; a death is explained only by a fault that kills. Of several such faults the most
recent is the cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from elastic_sim.history import History, Key, history
from elastic_sim.reports.spans import fault_starts
from elastic_sim.trace import TraceEvent

ObservationKind = Literal["died", "silent", "any"]

KILLING = frozenset({"crash", "crash_process", "crash_restart", "preempt", "scale_down",
                     "store_crash", "collective"})
"""Fault types that end a process (a collective fault may abort one)."""


@dataclass(frozen=True)
class FaultHit:
    """One fault as a cause: when it started and healed, whom it hit, which cut it made."""

    id: str
    type: str
    target: str
    start: float
    heal: float | None
    hosts: frozenset[str]
    sides: tuple[frozenset[str], ...] = ()
    """A cut's sides (partitions); empty for a host fault."""

    def separates(self, a: str, b: str) -> bool:
        """Whether this fault's cut puts ``a`` and ``b`` on different sides."""
        sa = next((i for i, s in enumerate(self.sides) if a in s), None)
        sb = next((i for i, s in enumerate(self.sides) if b in s), None)
        return sa is not None and sb is not None and sa != sb

    def hits(self, observer: str, culprits: Iterable[str]) -> bool:
        """Whether this fault explains ``observer`` losing one of ``culprits``."""
        if self.sides:
            return any(self.separates(observer, c) for c in culprits)
        return any(c in self.hosts for c in culprits)


@dataclass(frozen=True)
class Observation:
    """A failure as one survivor saw it, with the hosts it names."""

    t: float
    host: str
    kind: ObservationKind
    culprits: frozenset[str]
    since: float
    """When the failing call began waiting (a fault healed before cannot explain it)."""
    event: TraceEvent
    dead_by: float | None = None
    """When the named peer's process had ended (a fault that came later cannot explain it)."""


def fault_hits(events: Iterable[TraceEvent]) -> list[FaultHit]:
    """Every fault that started, in start order, with its footprint."""
    out = []
    for ev, heal in fault_starts(events):
        target = ev.get("target")
        hosts, sides = _footprint(target, ev.host)
        out.append(FaultHit(str(ev.get("id")), str(ev.get("type")), str(target), ev.t, heal,
                            hosts, sides))
    return out


def _footprint(target: Any, host: str) -> tuple[frozenset[str], tuple[frozenset[str], ...]]:
    """Hosts a fault hit, and the sides of its cut."""
    if isinstance(target, list) and target and all(isinstance(g, list) for g in target):
        sides = tuple(frozenset(str(h) for h in g) for g in target)
        return frozenset().union(*sides), sides
    if isinstance(target, dict):  # one-way partition: src cannot reach dst
        src = frozenset(str(h) for h in target.get("src", []))
        dst = frozenset(str(h) for h in target.get("dst", []))
        return src | dst, (src, dst)
    if isinstance(target, list):  # a link: its two ends
        return frozenset(str(h) for h in target), ()
    if isinstance(target, str) and target:
        return frozenset({target.split("/", 1)[0]}), ()
    return frozenset({host}), ()


def observations(events: Sequence[TraceEvent]) -> list[Observation]:
    """Every failure a job process saw that names a culprit, in trace order."""
    members: dict[str, dict[int, str]] = {}
    procs: dict[tuple[str, int], str] = {}
    exited: dict[str, float] = {}
    world: dict[str, frozenset[str]] = {}
    """Each host's current round membership: a group's members that never joined it."""
    joined: dict[tuple[str, str], float] = {}
    entered: dict[tuple[str, str, int], Key] = {}
    out = []
    hist = history(events)
    for key, ev in zip(hist.keys, hist.plain, strict=True):  # a stretch's entries: below
        kind = ev.kind
        if kind == "rdzv_done":
            world[ev.host] = frozenset(str(h) for h in ev.get("members", []))
        elif kind == "group_init":
            group = str(ev.get("group"))
            members.setdefault(group, {})[int(ev.get("rank", 0))] = ev.host
            procs[(group, int(ev.get("rank", 0)))] = ev.proc
            joined[(ev.proc, group)] = ev.t
            exited.pop(ev.proc, None)
        elif kind == "proc_exit":
            exited[ev.proc] = ev.t
        elif kind == "coll_enter":
            entered[(ev.proc, str(ev.get("group")), int(ev.get("seq", -1)))] = key
        elif kind in ("coll_fail", "group_failed"):
            group = str(ev.get("group"))
            since = (joined.get((ev.proc, group), ev.t) if kind == "group_failed" else
                     _entered(hist, entered, (ev.proc, group, int(ev.get("seq", -1))), key,
                              ev.t))
            obs = _collective_observation(ev, members.get(group, {}),
                                          world.get(ev.host, frozenset()), since)
            peer = ev.get("peer")
            dead = exited.get(procs.get((group, peer), "")) if isinstance(peer, int) else None
            out.append(replace(obs, dead_by=dead) if obs.kind == "died" else obs)
        elif kind == "agent_restart" and ev.get("reason") in ("FAILED", "UNHEALTHY"):
            out.append(Observation(ev.t, ev.host, "any", frozenset({ev.host}), ev.t, ev))
        elif kind in _NAMING:
            named = str(ev.get(_NAMING[kind])).split(":", 1)[0].split("/", 1)[0]
            out.append(Observation(ev.t, ev.host, "any", frozenset({named}), ev.t, ev))
        elif kind in _FAILURES and (gone := STORE_GONE.search(str(ev.get("error")))):
            out.append(Observation(ev.t, ev.host, "died", frozenset({gone.group(1)}), ev.t, ev))
        elif kind in ("job_failed", "rdzv_failed") and "timeout" in str(ev.get("error")).lower():
            # a store wait or a rendezvous that timed out: waiting on the rest of its world
            out.append(Observation(ev.t, ev.host, "silent", world.get(ev.host, frozenset())
                                   | {ev.host}, ev.t, ev))
    return out


def _entered(hist: History, recorded: dict[tuple[str, str, int], Key],
             which: tuple[str, str, int], before: Key, default: float) -> float:
    """When ``which`` (process, group, seq) last entered that collective before ``before``:
    a recorded ``coll_enter`` or a training stretch's."""
    keys = [k for k in (recorded.get(which), hist.entry_before(*which, before)) if k]
    return max(keys)[0] if keys else default


STORE_GONE = re.compile(r"store (\S+?):\d+ is gone")
"""A store client's error naming the store whose server died (the sim's wording)."""
_FAILURES = frozenset({"job_failed", "rdzv_failed", "rdzv_keep_alive_failed",
                       "exit_barrier_failed"})

_NAMING = {"hvd_blacklist": "target", "hvd_ssh_failed": "to", "hvd_spawner_error": "slot"}
"""Horovod driver events that name the host they failed on (the field that names it)."""


def _collective_observation(ev: TraceEvent, ranks: dict[int, str], world: frozenset[str],
                            since: float) -> Observation:
    """A failed collective or group: a dead peer it names, else every member it waited for
    (those that joined the group and the rest of the observer's round)."""
    peer = ev.get("peer")
    everyone = frozenset(ranks.values()) | world
    if ev.get("error") == "CollectiveFailed":
        if isinstance(peer, int) and peer in ranks:
            return Observation(ev.t, ev.host, "died", frozenset({ranks[peer]}), since, ev)
        return Observation(ev.t, ev.host, "died", everyone - {ev.host}, since, ev)
    return Observation(ev.t, ev.host, "silent", everyone | {ev.host}, since, ev)


def cause_of(obs: Observation, faults: Sequence[FaultHit]) -> FaultHit | None:
    """The most recent fault that explains ``obs`` (None: no fault does)."""
    best = None
    for f in faults:
        if f.start > obs.t:
            continue
        if obs.kind == "died" and (f.type not in KILLING
                                   or (obs.dead_by is not None and f.start > obs.dead_by)):
            continue
        if obs.kind == "silent" and f.heal is not None and f.heal < obs.since:
            continue
        if f.hits(obs.host, obs.culprits) and (best is None or f.start >= best.start):
            best = f
    return best


def detections(events: Sequence[TraceEvent], faults: Sequence[FaultHit]
               ) -> dict[str, Observation]:
    """Each fault's first observation: when the job first saw it (faults nobody saw are
    absent)."""
    out: dict[str, Observation] = {}
    for obs in observations(events):
        f = cause_of(obs, faults)
        if f is not None and f.id not in out:
            out[f.id] = obs
    return out
