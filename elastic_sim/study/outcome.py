"""What one replication of a setting came to (:class:`Run`: useful training time, and every
other second of the run blamed on a cause and a category), and what a setting's
replications say together, each figure with its 95 % confidence interval
(:class:`SettingResult`). Both levels, direct and composed, produce runs alike.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("detection", "capacity", "rendezvous", "restart", "lost work", "overlap",
              "degraded", "job failure", "resubmit", "job down")
"""Where a failure's time goes: noticing it; waiting for the failed node (or its
replacement) to come back; re-forming the world; restarting the workers (start-up,
checkpoint load, state sync); re-doing the work since the last checkpoint; what a second
failure added to a recovery under way; a job that trained on without the failed node
(torchft: the node-time its replica group was missing over the job's nodes, the share
of the GPUs idle); a job that failed, until it ended; the scheduler
starting it again; a job that stays down (failed with no resubmission, or out of nodes)."""
OVERHEAD = ("start", "checkpoint", "step overhead")
"""Time lost to no failure: the job's first start, its checkpoint writes, and each
step's cost beyond its training (``workload.step_overhead``)."""


@dataclass(frozen=True)
class Interval:
    """A stretch of the run without training, blamed on a cause and a category."""

    start: float
    end: float
    cause: str
    category: str


@dataclass
class Timeline:
    """The stretches a replication planned so far; a later event may cut the plan."""

    intervals: list[Interval] = field(default_factory=list)

    def add(self, start: float, length: float, cause: str, category: str) -> float:
        """Append ``length`` seconds from ``start``; where it ends."""
        if length > 0:
            self.intervals.append(Interval(start, start + length, cause, category))
        return start + max(length, 0.0)

    def cut(self, at: float) -> None:
        """Drop what was planned after ``at`` (the plan changed then)."""
        kept = []
        for iv in self.intervals:
            if iv.start >= at:
                continue
            kept.append(iv if iv.end <= at else Interval(iv.start, at, iv.cause, iv.category))
        self.intervals = kept


@dataclass
class Run:
    """One replication of one setting."""

    end: float
    """The run's end: the horizon, or when the job completed its work."""
    useful: float
    checkpoint: float
    lost_work: dict[str, float]
    intervals: list[Interval]
    recoveries: list[tuple[str, float]]
    """(cause, seconds from the failure until the job trained again) of each failure that
    stopped training."""
    fate: str
    """``running`` at the horizon, ``completed``, ``failed`` (no resubmission) or
    ``out of nodes``."""
    fate_at: float | None = None
    failures: int = 0
    job_failures: int = 0
    """Times the job died (and was resubmitted)."""
    degraded: dict[str, float] = field(default_factory=dict)
    """By cause, seconds of a job that trained on with a replica group missing, weighted
    by the share of the nodes missing (torchft)."""
    step_overhead: float = 0.0
    """Seconds of steps' cost beyond their training (``workload.step_overhead``)."""
    given_up: int = 0
    """Replica groups whose launchers spent their restarts while their hosts were up
    (torchft): lost for the rest of the run, their node-time counted as degraded."""

    @property
    def goodput(self) -> float:
        """Useful training time over the run's length."""
        return self.useful / self.end if self.end > 0 else 0.0

    def lost(self) -> dict[tuple[str, str], float]:
        """Seconds lost, by (cause, category), within the run."""
        out: dict[tuple[str, str], float] = {}
        for iv in self.intervals:
            span = min(iv.end, self.end) - max(iv.start, 0.0)
            if span > 0:
                out[(iv.cause, iv.category)] = out.get((iv.cause, iv.category), 0.0) + span
        for cause, s in self.lost_work.items():
            out[(cause, "lost work")] = out.get((cause, "lost work"), 0.0) + s
        for cause, s in self.degraded.items():
            out[(cause, "degraded")] = out.get((cause, "degraded"), 0.0) + s
        return out


@dataclass(frozen=True)
class Estimate:
    """A mean over replications and its 95 % confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    def to_json(self, digits: int = 6) -> dict[str, Any]:
        """Plain data."""
        return {"mean": round(self.mean, digits), "low": round(self.low, digits),
                "high": round(self.high, digits), "n": self.n}


_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}


def t95(df: int) -> float:
    """Student's t quantile for a two-sided 95 % interval (1.96 beyond 30 degrees)."""
    if df >= 30:
        return 1.96
    return _T95[max(k for k in _T95 if k <= max(df, 1))]


def estimate(values: Sequence[float], low: float = 0.0,
             high: float = math.inf) -> Estimate:
    """The mean of ``values`` with a t interval (no width from one value), kept within
    the quantity's own bounds ``low``..``high`` (a time is never negative, a ratio at
    most 1)."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = statistics.fmean(values)
    if n == 1:
        return Estimate(mean, mean, mean, 1)
    half = t95(n - 1) * statistics.stdev(values) / math.sqrt(n)
    return Estimate(mean, max(low, mean - half), min(high, mean + half), n)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    xs = sorted(values)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


@dataclass
class SettingResult:
    """A setting's replications, summarised."""

    label: str
    changes: dict[str, Any]
    method: str
    """``direct`` or ``composed``: how its figures were made."""
    runs: list[Run]
    notes: list[str] = field(default_factory=list)

    @property
    def goodput(self) -> Estimate:
        """Effective training time ratio."""
        return estimate([r.goodput for r in self.runs], 0.0, 1.0)

    def lost(self) -> dict[str, dict[str, Estimate]]:
        """Hours lost per replication, by cause and category (every replication counts,
        zero where it lost none)."""
        keys = sorted({k for r in self.runs for k in r.lost()})
        per = [r.lost() for r in self.runs]
        out: dict[str, dict[str, Estimate]] = {}
        for cause, cat in keys:
            out.setdefault(cause, {})[cat] = estimate([p.get((cause, cat), 0.0) / 3600.0
                                                       for p in per])
        return out

    def by_category(self) -> dict[str, Estimate]:
        """Hours lost per replication, by category over all causes."""
        cats = sorted({c for r in self.runs for (_, c) in r.lost()})
        per = [r.lost() for r in self.runs]
        return {c: estimate([sum(v for (_, k), v in p.items() if k == c) / 3600.0
                             for p in per]) for c in cats}

    def by_cause(self) -> dict[str, Estimate]:
        """Hours lost per replication, by cause over all categories."""
        causes = sorted({c for r in self.runs for (c, _) in r.lost()})
        per = [r.lost() for r in self.runs]
        return {c: estimate([sum(v for (k, _), v in p.items() if k == c) / 3600.0
                             for p in per]) for c in causes}

    def overhead(self) -> dict[str, Estimate]:
        """Hours per replication spent starting and writing checkpoints."""
        return {"checkpoint": estimate([r.checkpoint / 3600.0 for r in self.runs]),
                "step overhead": estimate([r.step_overhead / 3600.0 for r in self.runs]),
                "start": estimate([sum(iv.end - iv.start for iv in r.intervals
                                       if iv.category == "start") / 3600.0
                                   for r in self.runs])}

    def recovery(self) -> dict[str, dict[str, float]]:
        """Seconds from a failure until training resumed, by cause: count, median, p90,
        max (pooled over replications)."""
        pooled: dict[str, list[float]] = {}
        for r in self.runs:
            for cause, s in r.recoveries:
                pooled.setdefault(cause, []).append(s)
        return {c: {"n": len(v), "median": statistics.median(v),
                    "p90": percentile(v, 0.9), "max": max(v)} for c, v in sorted(pooled.items())}

    def fates(self) -> dict[str, int]:
        """How the replications ended."""
        return dict(Counter(r.fate for r in self.runs))

    def completion(self) -> Estimate | None:
        """Hours to complete the job's work, over the replications that completed."""
        done = [r.fate_at / 3600.0 for r in self.runs if r.fate == "completed"
                and r.fate_at is not None]
        return estimate(done) if done else None

    def to_json(self) -> dict[str, Any]:
        """Plain data for study.json."""
        return {
            "label": self.label, "changes": self.changes, "method": self.method,
            "replications": len(self.runs), "goodput": self.goodput.to_json(),
            "lost_hours": {c: {k: e.to_json(4) for k, e in cats.items()}
                           for c, cats in self.lost().items()},
            "lost_hours_by_category": {k: e.to_json(4) for k, e in self.by_category().items()},
            "overhead_hours": {k: e.to_json(4) for k, e in self.overhead().items()},
            "recovery_s": {c: {k: round(v, 3) for k, v in d.items()}
                           for c, d in self.recovery().items()},
            "fates": self.fates(),
            "completion_hours": (c.to_json(4) if (c := self.completion()) else None),
            "failures_per_run": estimate([r.failures for r in self.runs]).to_json(3),
            "job_failures_per_run": estimate([r.job_failures for r in self.runs]).to_json(3),
            "groups_given_up_per_run": estimate([r.given_up for r in self.runs]).to_json(3),
            "notes": self.notes,
        }
