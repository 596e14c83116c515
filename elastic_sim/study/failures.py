"""The failure process of a study: what fails, how often, what it does to the node it hits
and for how long. Data and pure draws only; the study's two levels (the direct simulation
and the composed Monte Carlo) consume the same arrivals.

A failure hits one host of the job's pool (its nodes and its spares, ``h0..``). Its cause
says what the simulator injects (:class:`Effect`: the host dies and a replacement takes its
place after ``downtime``, a worker process dies and the host lives, or the host freezes
for ``downtime``) and whether the host ever comes back.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from elastic_sim.weighted import pick_weighted

EffectKind = Literal["host", "process", "hang"]
"""``host``: the machine dies (its processes end, a store it hosts is gone) and, after its
downtime, a fresh one takes its place (a new incarnation); ``process``: one worker process
dies, the host lives on; ``hang``: the machine freezes for its downtime, then resumes."""

DAY = 86_400.0


@dataclass(frozen=True)
class Effect:
    """What a cause does to the host it hits."""

    kind: EffectKind
    downtime: float = 0.0
    """Seconds until the host (or a replacement in its place) is back; a hang's length."""
    returns: bool = True
    """False: the host never comes back (the pool shrinks for good)."""

    @property
    def takes_host(self) -> bool:
        """Whether the host is out of the pool for a while (a ``process`` failure leaves
        it in place)."""
        return self.kind != "process"


@dataclass(frozen=True)
class Cause:
    """One cause of failures: its share of all failures and its effect."""

    name: str
    share: float
    """Relative weight (a count of observed interruptions, or a fraction)."""
    effect: Effect
    category: str = ""


@dataclass(frozen=True)
class Failure:
    """One failure: when, which host (its index in the pool; None: whichever host of the
    running job the consumer picks), and its cause."""

    t: float
    host: int | None
    cause: str
    downtime: float
    """This failure's downtime (its cause's, or the log's own)."""


@dataclass(frozen=True)
class NodeRenewal:
    """Every host fails on its own: times between its failures drawn from a Weibull
    distribution of mean ``node_mtbf`` (``shape`` 1: exponential, a Poisson process);
    after a failure the host is down for its downtime, then its clock starts again."""

    node_mtbf: float
    shape: float = 1.0

    def describe(self) -> str:
        """One line for the report."""
        law = "exponential" if self.shape == 1.0 else f"Weibull shape {self.shape:g}"
        return f"each host fails every {self.node_mtbf / 3600:,.0f} h on average ({law})"

    def arrivals(self, hosts: int, horizon: float, causes: Sequence[Cause],
                 seed: str) -> list[Failure]:
        """The failures of ``hosts`` hosts within ``horizon`` seconds, in time order; each
        host draws from its own stream, so host i fails alike whatever the pool's size."""
        scale = self.node_mtbf / math.gamma(1.0 + 1.0 / self.shape)
        out: list[Failure] = []
        for h in range(hosts):
            rng = random.Random(f"{seed}/{h}")
            t = 0.0
            while True:
                t += rng.weibullvariate(scale, self.shape)
                if t >= horizon:
                    break
                cause = pick(causes, rng)
                out.append(Failure(t, h, cause.name, cause.effect.downtime))
                if not cause.effect.returns:
                    break
                if cause.effect.takes_host:
                    t += cause.effect.downtime
        return sorted(out, key=lambda f: (f.t, f.host))


@dataclass(frozen=True)
class JobInterval:
    """The job fails every ``low``..``high`` seconds (uniform), on a host of its own
    (a benchmark that injects failures into the running job)."""

    low: float
    high: float

    def describe(self) -> str:
        """One line for the report."""
        return f"the job fails every {self.low:,.0f}-{self.high:,.0f} s (uniform)"

    def arrivals(self, hosts: int, horizon: float, causes: Sequence[Cause],
                 seed: str) -> list[Failure]:
        """The failures within ``horizon``; each hits a host of the running job."""
        rng = random.Random(seed)
        out: list[Failure] = []
        t = rng.uniform(self.low, self.high)
        while t < horizon:
            cause = pick(causes, rng)
            out.append(Failure(t, None, cause.name, cause.effect.downtime))
            t += rng.uniform(self.low, self.high)
        return out


@dataclass(frozen=True)
class Replay:
    """A failure log, replayed as it is (every replication sees the same failures)."""

    failures: tuple[Failure, ...] = field(default_factory=tuple)
    source: str = ""

    def describe(self) -> str:
        """One line for the report."""
        return f"{len(self.failures)} failures replayed from {self.source}"

    def arrivals(self, hosts: int, horizon: float, causes: Sequence[Cause],
                 seed: str) -> list[Failure]:
        """The log's failures within ``horizon`` on hosts of the pool."""
        return [f for f in self.failures if f.t < horizon and (f.host is None or f.host < hosts)]


Process = NodeRenewal | JobInterval | Replay


def pick(causes: Sequence[Cause], rng: random.Random) -> Cause:
    """A cause drawn by share."""
    return pick_weighted(rng, causes, lambda c: c.share)


def node_mtbf_from_count(interruptions: float, days: float, gpus: int,
                         gpus_per_node: int) -> float:
    """Mean seconds between failures of one node, from ``interruptions`` observed over
    ``days`` on ``gpus`` GPUs (the rate per GPU, times a node's GPUs)."""
    per_gpu = interruptions / (days * DAY * gpus)
    return 1.0 / (per_gpu * gpus_per_node)


def job_mttf_at(points: Sequence[tuple[int, float]], gpus: int) -> float:
    """A job's mean time to failure (seconds) at ``gpus`` GPUs, by a power law through the
    published (GPUs, MTTF seconds) points: log-log interpolation between the two nearest,
    extrapolation along the end segment beyond them; one point scales as 1/GPUs."""
    pts = sorted(points)
    if len(pts) == 1:
        g, m = pts[0]
        return m * g / gpus
    i = next((k for k in range(1, len(pts) - 1) if gpus <= pts[k][0]), len(pts) - 1)
    (g0, m0), (g1, m1) = pts[i - 1], pts[i]
    slope = math.log(m1 / m0) / math.log(g1 / g0)
    return float(m0 * (gpus / g0) ** slope)


class FailureLogError(ValueError):
    """A failure log that cannot be read: ``where`` names the line and column."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[FailureLogError], tuple[str, str]]:
        """Pickled as its two parts (raised in a worker process, it reaches the parent
        whole)."""
        return (type(self), (self.where, self.message))


def parse_failure_log(text: str, causes: Sequence[Cause], hosts: int) -> list[Failure]:
    """Failures from a CSV log with a header ``time,host,cause[,downtime]``: seconds from
    the job's start, the host's index in the pool (or its name ``h<i>``), a cause the
    study names, and optionally this failure's downtime (default: its cause's)."""
    by_name = {c.name: c for c in causes}
    out: list[Failure] = []
    for i, row in enumerate(csv.DictReader(io.StringIO(text))):
        where = f"line {i + 2}"
        try:
            t = float(row.get("time") or "")
        except ValueError:
            raise FailureLogError(f"{where}.time", f"expected seconds, got "
                                  f"{row.get('time')!r}") from None
        if not (t >= 0 and math.isfinite(t)):
            raise FailureLogError(f"{where}.time", f"expected a time >= 0, got {t}")
        raw = str(row.get("host") or "").strip().removeprefix("h")
        if not raw.isdigit() or int(raw) >= hosts:
            raise FailureLogError(f"{where}.host", f"expected a host index 0..{hosts - 1} "
                                  f"(or h0..h{hosts - 1}), got {row.get('host')!r}")
        name = str(row.get("cause") or "").strip()
        if name not in by_name:
            raise FailureLogError(f"{where}.cause", f"unknown cause {name!r}; expected one "
                                  f"of: {', '.join(by_name)}")
        down = by_name[name].effect.downtime
        if row.get("downtime") not in (None, ""):
            try:
                down = float(str(row["downtime"]))
            except ValueError:
                raise FailureLogError(f"{where}.downtime", f"expected seconds, got "
                                      f"{row['downtime']!r}") from None
            if not (down >= 0 and math.isfinite(down)):
                raise FailureLogError(f"{where}.downtime", f"expected >= 0, got {down}")
        out.append(Failure(t, int(raw), name, down))
    return sorted(out, key=lambda f: f.t)
