"""Training progress along time: when the job advanced, when it stood still with live
members (a stall), and what each rollback threw away (lost steps).

Progress is read from each round's leading process (the one with the most steps, then the
lowest rank): its step events are the job's progress instants. A round's step period is the
median gap between its consecutive instants (the run's median for a round of one step).
Between two instants the job owes one period of work; whatever the gap holds beyond it is
stall time: inside a round it lies after the period that was due (``[prev + period, next]``:
the step waited), across rounds it runs from the period that was due to the start of the new
round's first step (its sync). A job that ended without completing stalls from its last due
step to its end.

A stall inside a fault's recovery window is that recovery's. The rest is blamed on a fault
that kept a host out which the next round admits back (a reconfiguration to re-admit it),
else on the latest fault still active when progress stopped, except one whose recovery had
already completed; else on no fault (a scale-up, a slow step).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from elastic_sim.history import Stretch, history, merged
from elastic_sim.reports.causes import FaultHit
from elastic_sim.trace import TraceEvent

STALL_AFTER = 0.05
"""Seconds a gap must exceed the typical step period by to count as a stall (a commit's
store round trips or a slow link do not)."""


@dataclass(frozen=True)
class RoundProgress:
    """One round's training as its leading process recorded it."""

    round: int
    lead: str
    steps: list[tuple[float, int]]
    """(time, step number) of the lead's steps, in order."""
    synced_at: float | None
    """When the lead entered training (its sync), if it recorded one."""
    reached: int
    """The highest step any process of the round recorded."""
    members: frozenset[str] = frozenset()
    period: float = 0.0
    """The median gap between the lead's consecutive steps (0: fewer than two steps)."""


@dataclass(frozen=True)
class Stall:
    """An interval with live members and no training progress, and what it is blamed on."""

    start: float
    end: float
    cause: str | None
    """The fault blamed (None: a reconfiguration or slowness no fault explains)."""
    recovering: bool
    """Inside the cause's recovery (detect .. first step of the new world), else a plain stall."""

    @property
    def duration(self) -> float:
        """Seconds of no progress."""
        return self.end - self.start


@dataclass(frozen=True)
class Rollback:
    """A restore to an earlier step: training resumed (or would have) from ``restored``."""

    round: int | None
    """The round that re-executes the steps (None: the job never trained again)."""
    at: float
    reached: int
    """The job's progress just before the rollback."""
    restored: int
    fault: str | None = None
    """The fault whose recovery this rollback was part of."""

    @property
    def lost(self) -> int:
        """Steps re-executed (or that would have to be): progress thrown away."""
        return max(0, self.reached - self.restored)


def round_progress(events: Sequence[TraceEvent], ranks: dict[int, dict[str, int]]
                   ) -> list[RoundProgress]:
    """Every round with steps, by round number. ``ranks``: each round's host ranks (its
    members)."""
    hist = history(events)
    steps: dict[int, dict[str, _Steps]] = {}
    syncs: dict[tuple[int, str], float] = {}
    hosts: dict[str, str] = {}
    for ev in merged(hist, hist.step_blocks()):
        if isinstance(ev, Stretch):
            rnd = int((ev.fields or {}).get("round", -1))
            steps.setdefault(rnd, {}).setdefault(ev.proc, _Steps()).add_stretch(ev)
            hosts[ev.proc] = ev.ev.host
        elif ev.kind == "step":
            rnd = int(ev.get("round", -1))
            steps.setdefault(rnd, {}).setdefault(ev.proc, _Steps()).add(ev.t, int(ev.get("step")))
            hosts[ev.proc] = ev.host
        elif ev.kind == "sync":
            syncs.setdefault((int(ev.get("round", -1)), ev.proc), ev.t)
    out = []
    for rnd in sorted(steps):
        by_proc = steps[rnd]
        rank = ranks.get(rnd, {})
        lead = min(by_proc, key=lambda p: (-by_proc[p].count, rank.get(hosts[p], 1 << 30), p))
        reached = max(seq.reached for seq in by_proc.values())
        mine = by_proc[lead].instants()
        out.append(RoundProgress(rnd, lead, mine, syncs.get((rnd, lead)), reached,
                                 frozenset(rank), _median(mine)))
    overall = _median([x for r in out for x in r.steps])
    return [r if r.period > 0 else replace(r, period=overall) for r in out]


class _Steps:
    """One process's steps in one round: recorded ones and stretches, in order."""

    def __init__(self) -> None:
        self.parts: list[tuple[float, int] | Stretch] = []
        self.count = 0
        self.reached: int = -(1 << 62)

    def add(self, t: float, step: int) -> None:
        self.parts.append((t, step))
        self.count += 1
        self.reached = max(self.reached, step)

    def add_stretch(self, st: Stretch) -> None:
        self.parts.append(st)
        self.count += st.step_events
        self.reached = max(self.reached, st.first + st.steps - 1)

    def instants(self) -> list[tuple[float, int]]:
        """(time, step number) of every step, in order."""
        out: list[tuple[float, int]] = []
        for part in self.parts:
            if isinstance(part, Stretch):
                out.extend((t, part.first + i) for i, t in enumerate(part.step_times()))
            else:
                out.append(part)
        return out


def _median(steps: Sequence[tuple[float, int]]) -> float:
    """The median gap between consecutive step times (0 with fewer than two)."""
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(steps))
    return gaps[len(gaps) // 2] if gaps else 0.0


@dataclass(frozen=True)
class Gap:
    """Time without progress beyond the period that was due."""

    start: float
    end: float
    last: float
    """The progress instant before it."""
    newcomers: frozenset[str] = frozenset()
    """Hosts the round after the gap admits that the round before it lacked."""


def no_progress(runs: Sequence[RoundProgress], end: float | None) -> list[Gap]:
    """Every stall; ``end``: when a job that did not complete ended (None: it completed)."""
    by_round = {r.round: r for r in runs}
    points = sorted((t, r.round) for r in runs for t, _ in r.steps)
    out = []
    for (ta, ra), (tb, rb) in itertools.pairwise(points):
        before, after = by_round[ra], by_round[rb]
        a = ta + before.period
        if ra == rb:
            b = tb
        else:
            sync = after.synced_at
            b = sync if sync is not None and sync <= after.steps[0][0] else tb - after.period
        if b - a >= STALL_AFTER:
            out.append(Gap(a, b, ta, after.members - before.members))
    if end is not None and points:
        a = points[-1][0] + by_round[points[-1][1]].period
        if end - a >= STALL_AFTER:
            out.append(Gap(a, end, points[-1][0]))
    return out


def blame_stalls(gaps: Sequence[Gap], windows: Sequence[tuple[float, float, str]],
                 faults: Sequence[FaultHit]) -> list[Stall]:
    """Split each stall by the recovery windows ``(start, end, fault id)`` that cover it;
    blame the rest as the module says."""
    done = {w[2]: w[1] for w in windows}
    out: list[Stall] = []
    for gap in gaps:
        a, b = gap.start, gap.end
        cuts = sorted({a, b, *(x for w in windows for x in w[:2] if a < x < b)})
        for x, y in itertools.pairwise(cuts):
            cover = [w for w in windows if w[0] <= x and w[1] >= y]
            if cover:
                stall = Stall(x, y, min(cover)[2], True)
            else:
                stall = Stall(x, y, _blame(gap, y, faults, done), False)
            prev = out[-1] if out else None
            if prev and prev.end == x and (prev.cause, prev.recovering) == (stall.cause,
                                                                           stall.recovering):
                out[-1] = Stall(prev.start, y, stall.cause, stall.recovering)
            else:
                out.append(stall)
    return out


def _blame(gap: Gap, until: float, faults: Sequence[FaultHit], done: dict[str, float]
           ) -> str | None:
    """The fault a stall (outside any recovery) is blamed on, up to ``until``."""
    readmitted = [f for f in faults if f.start < until and f.hosts & gap.newcomers]
    live = readmitted or [f for f in faults if f.start < until
                          and (f.heal is None or f.heal > gap.last)
                          and done.get(f.id, gap.last + 1) > gap.last]
    return max(live, key=lambda f: f.start).id if live else None


def rollbacks(runs: Sequence[RoundProgress], events: Sequence[TraceEvent],
              formed: dict[int, float], end: float | None) -> list[Rollback]:
    """One rollback per round that trained from behind the progress of the round before
    it; and, for a job that never trained again (``end``: when it ended; None: it
    completed), the progress it threw away: to the restores after its last step, else to
    its last commit (where a restarted job resumes: the steps since are lost)."""
    out = []
    prev: RoundProgress | None = None
    for r in runs:
        start = r.steps[0][1] - 1
        if prev is not None and prev.reached > start:
            out.append(Rollback(r.round, formed.get(r.round, r.steps[0][0]), prev.reached, start))
        prev = r
    if end is not None and prev is not None:
        last = prev.steps[-1][0]
        hist = history(events)
        restores = [ev for ev in hist.of("restore") if ev.t >= last]
        if restores:
            low = min(int(ev.get("step", 0)) for ev in restores)
            if prev.reached > low:
                out.append(Rollback(None, restores[0].t, prev.reached, low))
        else:
            committed = max((int(ev.get("step", 0)) for ev in hist.of("commit")
                             if int(ev.get("step", 0)) <= prev.reached), default=0)
            if prev.reached > committed:
                out.append(Rollback(None, max(end, last), prev.reached, committed))
    return out
