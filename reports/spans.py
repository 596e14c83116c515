"""What every process was doing when: the trace folded into per-process phase spans.

A process is in one phase at a time: ``rendezvous`` (rdzv_join .. rdzv_done), ``sync``
(group_init .. sync), ``training`` (sync .. the round ends). On top of the phases lie
overlays: ``blocked`` (waiting in a collective for a peer that is late, or that never
comes), ``stopped`` (the host is frozen by a hang fault) and ``down`` (the process died).
The timeline plot, the Perfetto export and the campaign coverage all read this model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from elastic_sim.trace import TraceEvent

PHASES = ("rendezvous", "sync", "training")
OVERLAYS = ("blocked", "stopped", "down")
STATES = PHASES + OVERLAYS
"""Every state a span can have, in drawing order (later ones are drawn on top)."""

PSEUDO_PROCS = frozenset({"elastic-sim", "fault-injector"})
"""Processes that record events but are not part of the job."""

BLOCKED_AFTER = 0.05
"""Seconds a process must wait in a collective for a peer before it counts as blocked."""

_ENDS_PHASE = frozenset({"job_done", "job_failed", "proc_exit"})


@dataclass(frozen=True)
class Span:
    """A process in one state from ``start`` to ``end`` (run time, seconds)."""

    state: str
    start: float
    end: float
    round: int | None = None

    @property
    def duration(self) -> float:
        """Seconds in this state."""
        return self.end - self.start


@dataclass(frozen=True)
class Collective:
    """One collective as one process saw it."""

    group: str
    seq: int
    op: str
    start: float
    end: float
    failed: bool
    error: str = ""


@dataclass
class ProcessTimeline:
    """One process's life: phases, overlays, collectives and notable instants."""

    proc: str
    host: str
    phases: list[Span] = field(default_factory=list)
    overlays: list[Span] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    steps: list[tuple[float, int]] = field(default_factory=list)
    restores: list[float] = field(default_factory=list)
    exits: list[tuple[float, int]] = field(default_factory=list)
    """(time, exit code) of every exit."""
    ending: str = ""
    """How the process's story ended: done, failed, rejected, crashed, exited, or ''."""
    path: list[str] = field(default_factory=lambda: ["start"])
    """The protocol states it went through, in order (phases and decisive events)."""
    ranks: list[int] = field(default_factory=list)
    """The ranks it held in its groups, in order (a rank repeated is kept once)."""

    def transitions(self) -> list[tuple[str, str]]:
        """Consecutive pairs of :attr:`path`: the protocol transitions this process took."""
        return list(zip(self.path, self.path[1:], strict=False))


@dataclass(frozen=True)
class FaultSpan:
    """A fault from the moment it fired until it healed (``end`` None: never healed)."""

    id: str
    type: str
    target: str
    host: str
    start: float
    end: float | None


def host_key(name: str) -> tuple[object, ...]:
    """Natural sort key: h2 before h10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def end_time_of(events: Sequence[TraceEvent]) -> float:
    """When the run ended: run_end if recorded, else the last event."""
    ends = [ev.t for ev in events if ev.kind == "run_end"]
    return ends[-1] if ends else max((ev.t for ev in events), default=0.0)


def fault_starts(events: Iterable[TraceEvent]) -> list[tuple[TraceEvent, float | None]]:
    """Every fault's start event, in start order, with its heal time when it healed."""
    started: dict[str, TraceEvent] = {}
    healed: dict[str, float] = {}
    for ev in events:
        if ev.kind != "fault":
            continue
        fid = str(ev.get("id"))
        if ev.get("phase") == "start":
            started.setdefault(fid, ev)
        elif ev.get("phase") == "heal":
            healed[fid] = ev.t
    return [(ev, healed.get(fid)) for fid, ev in started.items()]


def fault_spans(events: Iterable[TraceEvent]) -> list[FaultSpan]:
    """Every fault that fired, with its heal time when it healed."""
    return [FaultSpan(str(ev.get("id")), str(ev.get("type")), str(ev.get("target")), ev.host,
                      ev.t, heal) for ev, heal in fault_starts(events)]


def is_job_process(ev: TraceEvent) -> bool:
    """Whether an event belongs to a process of the job (not the runner or the injector)."""
    return ev.host != "*" and ev.proc not in PSEUDO_PROCS


class _Folder:
    """Folds one process's events into spans, one event at a time."""

    def __init__(self, tl: ProcessTimeline) -> None:
        self.tl = tl
        self.open: tuple[str, float, int | None] | None = None
        self.entered: dict[tuple[str, int], TraceEvent] = {}
        self.forming: float | None = None
        """When this process began forming a group that is not ready yet."""

    def close(self, t: float) -> None:
        if self.open is not None:
            state, start, rnd = self.open
            self.tl.phases.append(Span(state, start, max(start, t), rnd))
            self.open = None
        if self.forming is not None:  # the group never became ready: waited for a peer
            self.tl.overlays.append(Span("blocked", self.forming, max(self.forming, t)))
            self.forming = None
            self.mark("group_failed")

    def begin(self, state: str, t: float, rnd: int | None) -> None:
        self.close(t)
        self.open = (state, t, rnd)
        self.mark(state)

    def mark(self, state: str) -> None:
        if self.tl.path[-1] != state:
            self.tl.path.append(state)

    def feed(self, ev: TraceEvent) -> None:
        kind, t, tl = ev.kind, ev.t, self.tl
        rnd = ev.get("round")
        rnd = int(rnd) if isinstance(rnd, int) else None
        if kind == "rdzv_join":
            self.begin("rendezvous", t, rnd)
        elif kind in ("rdzv_done", "rdzv_rejected", "rdzv_failed"):
            self.close(t)
            tl.ending = {"rdzv_rejected": "rejected", "rdzv_failed": "failed"}.get(kind, "")
            if tl.ending:
                self.mark(tl.ending)
        elif kind == "group_init":
            self.begin("sync", t, self._round_of_group(ev))
            self.forming = t
            rank = ev.get("rank")
            if isinstance(rank, int) and (not tl.ranks or tl.ranks[-1] != rank):
                tl.ranks.append(rank)
        elif kind == "group_ready":
            self.forming = None
        elif kind == "sync":
            self.begin("training", t, rnd)
        elif kind == "step":
            if self.open is None:  # a protocol without a sync event: training starts here
                self.begin("training", t, rnd)
            tl.steps.append((t, int(ev.get("step", 0))))
        elif kind == "coll_enter":
            self.entered[(str(ev.get("group")), int(ev.get("seq", -1)))] = ev
        elif kind in ("coll_done", "coll_fail"):
            self._collective(ev)
        elif kind == "restore":
            tl.restores.append(t)
            self.mark("restore")
        elif kind == "rdzv_leave":
            self.close(t)
            self.mark("leave")
        elif kind in _ENDS_PHASE:
            self.close(t)
            self._ending(ev)

    def _round_of_group(self, ev: TraceEvent) -> int | None:
        digits = re.findall(r"\d+", str(ev.get("group", "")))
        return int(digits[-1]) if digits else None

    def _collective(self, ev: TraceEvent) -> None:
        key = (str(ev.get("group")), int(ev.get("seq", -1)))
        enter = self.entered.pop(key, None)
        start = enter.t if enter is not None else ev.t
        failed = ev.kind == "coll_fail"
        self.tl.collectives.append(Collective(key[0], key[1], str(ev.get("op", "")), start, ev.t,
                                              failed, str(ev.get("error", "") or "")))
        if failed:
            self.close(ev.t)  # the round is over for this process
            self.mark("collective_failed")

    def _ending(self, ev: TraceEvent) -> None:
        tl = self.tl
        if ev.kind == "job_done":
            tl.ending = "done"
        elif ev.kind == "job_failed":
            tl.ending = "failed"
        elif ev.kind == "proc_exit":
            code = int(ev.get("code", 0))
            tl.exits.append((ev.t, code))
            if code != 0 and tl.ending not in ("done", "failed"):
                tl.ending = "crashed"
            elif not tl.ending:
                tl.ending = "exited"
        self.mark(tl.ending)


def timelines(
    events: Sequence[TraceEvent], blocked_after: float = BLOCKED_AFTER
) -> list[ProcessTimeline]:
    """One timeline per job process, ordered by host (naturally) then process name."""
    end = end_time_of(events)
    folders: dict[str, _Folder] = {}
    for ev in events:
        if not is_job_process(ev):
            continue
        folder = folders.get(ev.proc)
        if folder is None:
            folder = folders[ev.proc] = _Folder(ProcessTimeline(ev.proc, ev.host))
        folder.feed(ev)
    for folder in folders.values():
        folder.close(end)
    out = sorted((f.tl for f in folders.values()), key=lambda tl: (host_key(tl.host),
                                                                   host_key(tl.proc)))
    _add_overlays(out, events, end, blocked_after)
    return out


def _add_overlays(
    tls: list[ProcessTimeline], events: Sequence[TraceEvent], end: float, blocked_after: float
) -> None:
    """Blocked (waiting for a late or dead peer), stopped (hung host), down (after a crash)."""
    last_enter: dict[tuple[str, int], float] = {}
    for tl in tls:
        for c in tl.collectives:
            key = (c.group, c.seq)
            last_enter[key] = max(last_enter.get(key, c.start), c.start)
    hangs = [f for f in fault_spans(events) if f.type == "hang"]
    restarts = {(ev.proc, ev.t) for ev in events if ev.kind == "proc_start"}
    for tl in tls:
        for c in tl.collectives:
            until = c.end if c.failed else min(c.end, last_enter[(c.group, c.seq)])
            if until - c.start >= blocked_after:
                tl.overlays.append(Span("blocked", c.start, until))
        for f in hangs:
            if f.host == tl.host:
                tl.overlays.append(Span("stopped", f.start, end if f.end is None else f.end))
        for t, code in tl.exits:
            if code != 0:
                back = min((s for p, s in restarts if p == tl.proc and s > t), default=end)
                tl.overlays.append(Span("down", t, back))
        tl.overlays.sort(key=lambda s: s.start)
