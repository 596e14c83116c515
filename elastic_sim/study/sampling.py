"""The recoveries a composed study needs, sampled in the simulator with the faithful model
at the job's size (or at a ladder of sizes, :mod:`elastic_sim.study.scaling`), on the
campaign executor (local worker processes or Ray), each read from the disk cache when an
earlier study ran it.

What is sampled, per setting: every class of failure its causes fall into (effect,
downtime, whether the host returns), hitting an ordinary host and the host serving the
rendezvous store, with and without a hot spare when the pool has spares; and every pair of
classes overlapping (a second failure a third and two thirds of the way into the first's
recovery), at the smallest size sampled.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from elastic_sim.study.cache import SampleCache
from elastic_sim.study.failures import Cause
from elastic_sim.study.load import Job, Study
from elastic_sim.study.samples import Kind, Measured, run_sample, sample_scenario
from elastic_sim.study.scaling import Growth, ladder, scale

OVERLAP_AT = (1 / 3, 2 / 3)
"""Where in the first recovery an overlapping failure is sampled (fractions of it)."""

Request = tuple[Job, int, Kind, int, float | None]
"""(setting, nodes, kind, seed, the first failure's time for an overlap sample)."""


def classes(causes: Iterable[Cause]) -> list[tuple[str, float, bool]]:
    """The distinct (effect, downtime, returns) of the causes, in a stable order."""
    return sorted({(c.effect.kind, c.effect.downtime if c.effect.takes_host else 0.0,
                    c.effect.returns if c.effect.takes_host else True) for c in causes})


def single_kinds(job: Job, causes: Iterable[Cause]) -> list[Kind]:
    """The one-failure kinds a setting needs."""
    out = []
    for effect, down, returns in classes(causes):
        out.append(Kind(effect, down, returns=returns))  # type: ignore[arg-type]
        if job.spares > 0:  # a hot spare up in the pool changes any recovery
            out.append(Kind(effect, down, spare=True, returns=returns))  # type: ignore[arg-type]
        if effect != "process":
            out.append(Kind(effect, down, "store", returns=returns))  # type: ignore[arg-type]
    return out


@dataclass
class Book:
    """A setting's recoveries at its own size, by kind, for the composition."""

    nodes: int
    sizes: list[int]
    singles: dict[Kind, list[Measured]]
    overlaps: dict[Kind, list[Measured]]
    growths: dict[str, list[Growth]] = field(default_factory=dict)
    """Each scaled kind's growth per phase (empty when sampled at the job's size)."""

    def single(self, effect: str, downtime: float, target: str, spare: bool,
               returns: bool, rng: random.Random) -> Measured:
        """A sample of the kind nearest to this failure's (same effect; the nearest
        downtime; the target and spare as asked when sampled). The target decides before
        the spare: the store host's death is sampled without a spare (a spare does not
        save a job whose store is gone), so it is used with one too."""
        pool = [k for k in self.singles if k.effect == effect and k.returns == returns] or \
            [k for k in self.singles if k.effect == effect]
        fit = [k for k in pool if k.target == target and k.spare == spare] or \
            [k for k in pool if k.target == target] or \
            [k for k in pool if k.target == "other" and k.spare == spare] or \
            [k for k in pool if k.target == "other"]
        kind = min(fit, key=lambda k: (abs(k.downtime - downtime), k.downtime))
        return rng.choice(self.singles[kind])

    def overlap(self, first: Kind, effect: str, downtime: float, fraction: float,
                rng: random.Random) -> Measured | None:
        """A sample of a second failure (``effect``, ``downtime``) ``fraction`` of the
        way into a recovery of ``first``'s class; None when none was sampled."""
        pool = [k for k in self.overlaps if k.effect == first.effect
                and k.second == effect and k.returns == first.returns]
        if not pool:
            return None
        near = min(pool, key=lambda k: (abs(k.downtime - first.downtime),
                                        abs(k.second_downtime - downtime)))
        same = [k for k in pool if (k.downtime, k.second_downtime) ==
                (near.downtime, near.second_downtime)]
        got = [m for k in same for m in self.overlaps[k] if m.total is not None]
        if not got:
            return None
        best = min(abs(_fraction(m) - fraction) for m in got)
        return rng.choice([m for m in got if abs(_fraction(m) - fraction) == best])

    def starts(self) -> list[float]:
        """A fresh job's start (to its first step's sync) in every sample."""
        return [m.start_s for ms in self.singles.values() for m in ms if m.start_s is not None]


def _fraction(m: Measured) -> float:
    """Where in its first recovery an overlap sample's second failure came."""
    first = m.kind.second_after
    whole = first + (m.total or 0.0)
    return first / whole if whole > 0 else 0.0


@dataclass
class Sampled:
    """Every sample a study used, and what sampling cost."""

    books: dict[str, Book]
    """By setting label."""
    measured: list[Measured]
    ran: int = 0
    cached: int = 0
    cpu_s: float = 0.0


def measure(context: Any, job: Job, nodes: int, kind: Kind, seed: int,
            fault_at: float | None) -> Measured:
    """A campaign task: one sample (``context`` unused)."""
    return run_sample(job, nodes, kind, seed, fault_at)


def sample_study(study: Study, workers: int = 1, ray: str | None = None,
                 cache: SampleCache | None = None,
                 progress: Callable[[int, int, int], None] | None = None) -> Sampled:
    """Sample every recovery the study's settings need; ``progress(done, total,
    cached)`` after each."""
    from elastic_sim.campaign import Executor

    cache = cache or SampleCache(None)
    replicates = study.sampling.replicates
    got: dict[str, Measured] = {}
    out = Sampled({}, [])

    def run(requests: list[Request]) -> None:
        todo: list[Request] = []
        keys: list[str] = []
        for req in requests:
            scenario = sample_scenario(*req)
            key = SampleCache.key(scenario)
            if key in got or key in keys:
                continue
            hit = cache.get(scenario)
            if hit is not None:
                got[key] = hit
                out.cached += 1
            else:
                todo.append(req)
                keys.append(key)
        if progress:
            progress(len(got), len(got) + len(todo), out.cached)
        if not todo:
            return
        with Executor(None, workers, ray) as ex:
            for i, (req, key, m) in enumerate(zip(todo, keys, ex.map(measure, todo),
                                                  strict=True)):
                got[key] = m
                cache.put(sample_scenario(*req), m)
                out.ran += 1
                out.cpu_s += m.cpu_s
                if progress:
                    progress(len(got), len(got) + len(todo) - i - 1, out.cached)

    def key_of(req: Request) -> str:
        return SampleCache.key(sample_scenario(*req))

    seeds = [study.spec.seed + r for r in range(replicates)]
    plans = {job.label: (job, ladder(job.nodes, study.sampling.max_nodes, study.sampling.sizes),
                         single_kinds(job, study.causes)) for job in study.jobs}
    run([(job, n, k, s, None) for job, sizes, kinds in plans.values()
         for n in sizes for k in kinds for s in seeds])
    overlap_reqs: dict[str, list[Request]] = {}
    for label, (job, sizes, _) in plans.items():
        reqs = []
        n = sizes[0]
        for effect, down, returns in classes(study.causes):
            base = Kind(effect, down, returns=returns)  # type: ignore[arg-type]
            singles = [got[key_of((job, n, base, s, None))] for s in seeds]
            ok = [m for m in singles if m.total is not None and m.fault_at is not None]
            if not ok:
                continue
            whole = statistics.median(m.total for m in ok if m.total is not None)
            first = ok[0]
            for effect2, down2, _ in classes(study.causes):
                for frac in OVERLAP_AT:
                    kind = replace(base, second=effect2,  # type: ignore[arg-type]
                                   second_downtime=down2, second_after=round(frac * whole, 3))
                    reqs.append((job, n, kind, first.seed, first.fault_at))
        overlap_reqs[label] = reqs
    run([r for reqs in overlap_reqs.values() for r in reqs])
    for label, (job, sizes, kinds) in plans.items():
        by_kind: dict[Kind, list[Measured]] = {}
        growths: dict[str, list[Growth]] = {}
        for kind in kinds:
            by_size = {n: [m for s in seeds if (m := got[key_of((job, n, kind, s, None))])
                           .fault_at is not None] for n in sizes}
            by_size = {n: ms for n, ms in by_size.items() if ms}
            if not by_size:
                continue
            scaled, growth = scale(by_size, job.nodes)
            by_kind[kind] = scaled
            if growth:
                growths[kind.label()] = growth
        overlaps: dict[Kind, list[Measured]] = {}
        for req in overlap_reqs[label]:
            m = got[key_of(req)]
            if m.fault_at is not None:
                overlaps.setdefault(req[2], []).append(m)
        out.books[label] = Book(job.nodes, sizes, by_kind, overlaps, growths)
    out.measured = list(got.values())
    return out
