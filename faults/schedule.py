"""Fault schedules as data: the space they are drawn from, how one is drawn, and how one is
made simpler (shrinking).

One generator serves every search. It asks a :class:`Chooser` for every choice it makes, so
the same code draws from a seeded ``random.Random`` (``elastic-sim explore``) or from a
Hypothesis draw (:mod:`elastic_sim.faults.strategies`), where Hypothesis then shrinks every choice.
Times are whole milliseconds so that a schedule written to YAML reads back exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from elastic_sim.faults.draw import draw_duration, generator
from elastic_sim.faults.model import (
    ENDS_A_HOST,
    FAULT_TYPES,
    CrashHost,
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    Fault,
    HangHost,
    Partition,
)
from elastic_sim.faults.triggers import EventTrigger, Triggered, unwrap

T = TypeVar("T")

DEFAULT_TYPES: tuple[str, ...] = ("crash", "hang", "partition")
"""Fault types drawn unless the space names others."""


class Chooser(Protocol):
    """The source of every choice a generated schedule makes."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``; shrinks towards ``lo``."""
        ...


class RandomChooser:
    """Choices from a seeded :class:`random.Random` (repeatable, no shrinking)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        """Uniform in ``[lo, hi]``."""
        return self.rng.randint(lo, hi)


@dataclass(frozen=True)
class FaultSpace:
    """Which schedules a search may draw: over which hosts, when, how many, which types."""

    hosts: tuple[str, ...]
    horizon: float
    """Faults start in ``[0, horizon]`` seconds of run time."""
    types: tuple[str, ...] = DEFAULT_TYPES
    max_faults: int = 3
    max_duration: float = 60.0
    """Longest hang or partition, seconds."""
    min_duration: float = 0.001
    timescales: tuple[float, ...] = ()
    """The protocol's own timeouts (seconds): durations are also drawn just short of and
    just past each, the windows where a fault outlasts a timeout."""
    spare: tuple[str, ...] = ()
    """Hosts never crashed (e.g. the store host, whose loss ends a job by design)."""
    max_crashes: int | None = None
    """Most hosts one schedule crashes for good (keep ``min_hosts`` alive: the contract)."""
    store_host: str = ""
    """Where the store runs (default: the first host): store faults aim there."""
    proc_name: str = "main"
    """Each host's first process (``host/<proc_name>``): what crash_process kills."""
    triggers: tuple[EventTrigger, ...] = ()
    """Trace events a fault may fire at instead of a time (steps, rounds completing,
    barriers: the narrow windows); none: every fault fires at a time."""
    targets: tuple[str, ...] = ()
    """The hosts faults may aim at (a swarm's draw); none: every host."""
    procs: tuple[str, ...] = ()
    """Every process a process-level fault may aim at (``host/name``: agents, drivers and
    workers alike); none: each host's first process."""
    startup: float = 0.0
    """The start-up window (seconds: until the first round forms): a quarter of the
    faults start in it."""

    @property
    def aimable(self) -> tuple[str, ...]:
        """The hosts faults may aim at."""
        return self.targets or self.hosts

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValueError("a fault space needs at least one host")
        unknown = [t for t in self.types if t not in GENERATORS]
        if unknown:
            raise ValueError(f"cannot generate fault types {unknown}: expected some of "
                             f"{sorted(GENERATORS)}")
        if self.horizon < 0 or self.max_faults < 0 or self.max_duration < self.min_duration:
            raise ValueError("horizon, max_faults and durations must be non-negative and "
                             "max_duration >= min_duration")


def _pick(c: Chooser, items: Sequence[T]) -> T:
    return items[c.integer(0, len(items) - 1)]


def _ms(c: Chooser, lo: float, hi: float) -> float:
    """A time in whole milliseconds in ``[lo, hi]``; shrinks towards ``lo``."""
    lo_ms, hi_ms = round(lo * 1000), max(round(lo * 1000), round(hi * 1000))
    return c.integer(lo_ms, hi_ms) / 1000


def _crash(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault | None:
    targets = [h for h in s.aimable if h not in s.spare]
    return CrashHost(fid, at, _pick(c, targets)) if targets else None


def _hang(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault:
    return HangHost(fid, at, _pick(c, s.aimable), draw_duration(c, s))


def _partition(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault | None:
    if len(s.hosts) < 2:
        return None
    # A side of 1..n-1 hosts (from those faults may aim at) against the rest; index order
    # keeps it deterministic.
    pool = list(s.aimable) if len(s.aimable) < len(s.hosts) else list(s.hosts)
    side_size = c.integer(1, min(len(pool), len(s.hosts) - 1))
    side = []
    for _ in range(side_size):
        side.append(pool.pop(c.integer(0, len(pool) - 1)))
    rest = tuple(h for h in s.hosts if h not in side)
    groups = (tuple(h for h in s.hosts if h in side), rest)
    return Partition(fid, at, groups, draw_duration(c, s))


def _discovery_add(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault:
    return DiscoveryAdd(fid, at, _pick(c, s.aimable), duration=draw_duration(c, s))


def _discovery_remove(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault:
    return DiscoveryRemove(fid, at, _pick(c, s.aimable), duration=draw_duration(c, s))


def _discovery_error(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault:
    return DiscoveryScriptError(fid, at, draw_duration(c, s))


def _discovery_hang(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault:
    return DiscoveryScriptHang(fid, at, draw_duration(c, s))


Generator = Callable[[Chooser, FaultSpace, str, float], "Fault | None"]

GENERATORS: dict[str, Generator] = {
    "crash": _crash,
    "hang": _hang,
    "partition": _partition,
    "discovery_add": _discovery_add,
    "discovery_remove": _discovery_remove,
    "discovery_error": _discovery_error,
    "discovery_hang": _discovery_hang,
}
"""Fault type -> how one fault of it is drawn (None when the space allows none). Every
type is drawable: those without a generator of their own here are drawn from their class
(:func:`elastic_sim.faults.draw.draw_fault`)."""
GENERATORS.update({t: generator(cls) for t, cls in FAULT_TYPES.items() if t not in GENERATORS})


def draw_schedule(c: Chooser, space: FaultSpace) -> tuple[Fault, ...]:
    """A schedule of 0..max_faults faults, in time order; ids ``x<i>-<type>``."""
    n = c.integer(0, space.max_faults)
    out: list[Fault] = []
    crashed: set[str] = set()
    for i in range(n):
        f = draw_one(c, space, f"x{i}")
        if f is not None and isinstance(unwrap(f), ENDS_A_HOST) \
                and space.max_crashes is not None:
            host = f.hosts()[0]
            if host not in crashed and len(crashed) >= space.max_crashes:
                continue  # beyond the contract: the draw is spent, the fault dropped
            crashed.add(host)
        if f is not None:
            out.append(f)
    return tuple(sorted(out, key=lambda f: f.at))


def draw_one(c: Chooser, space: FaultSpace, prefix: str) -> Fault | None:
    """One fault of a drawn type (id ``<prefix>-<type>``), at a drawn time or, where the
    space has triggers, at one of its events; None when the space allows none of it."""
    kind = _pick(c, space.types)
    f = GENERATORS[kind](c, space, f"{prefix}-{kind}", draw_time(c, space))
    if f is not None and space.triggers:
        pull = c.integer(0, len(space.triggers))  # 0: at its time (the simplest)
        if pull:
            f = Triggered(f.id, 0.0, replace(f, at=0.0), space.triggers[pull - 1])
    return f


def draw_time(c: Chooser, space: FaultSpace) -> float:
    """When a fault starts: within the start-up window one time in four (where the space
    has one; the simplest choice), else anywhere up to the horizon."""
    if space.startup > 0 and c.integer(0, 3) == 0:
        return _ms(c, 0.0, min(space.startup, space.horizon))
    return _ms(c, 0.0, space.horizon)


def random_schedule(seed: str, space: FaultSpace) -> tuple[Fault, ...]:
    """The schedule drawn from the random stream named ``seed``."""
    return draw_schedule(RandomChooser(random.Random(seed)), space)


# -- shrinking -------------------------------------------------------------------------


def _simpler_times(f: Fault) -> Iterator[Fault]:
    """The same fault at a rounder or earlier time (a triggered one: the same fault at its
    watch time, untriggered)."""
    if isinstance(f, Triggered):
        inner = unwrap(f)
        if inner is not f:
            yield replace(inner, at=f.at)
        return
    for at in (0.0, float(int(f.at)), round(f.at, 1), round(f.at / 2, 3)):
        if at < f.at:
            yield replace(f, at=at)


def _simpler_durations(f: Fault) -> Iterator[Fault]:
    duration = getattr(f, "duration", None)
    if not isinstance(duration, float):
        return
    for d in (float(int(duration)), round(duration, 1), round(duration / 2, 3)):
        if 0 < d < duration:
            yield replace(f, duration=d)  # type: ignore[call-arg]


def _simpler_partition(f: Fault) -> Iterator[Fault]:
    if not isinstance(f, Partition):
        return
    for g, group in enumerate(f.groups):
        if len(group) > 1:
            for h in group:
                groups = tuple(
                    tuple(x for x in grp if x != h) if i == g else grp
                    for i, grp in enumerate(f.groups)
                )
                yield replace(f, groups=groups)


def simpler_faults(f: Fault) -> list[Fault]:
    """Simpler versions of one fault, simplest first: earlier/rounder times, shorter
    durations, smaller partition sides."""
    seen: set[Fault] = set()
    out: list[Fault] = []
    for cand in (*_simpler_times(f), *_simpler_durations(f), *_simpler_partition(f)):
        if cand != f and cand not in seen:
            seen.add(cand)
            out.append(cand)
    return out


def shrink_candidates(schedule: Sequence[Fault],
                      pinned: Mapping[str, Fault] | None = None) -> list[tuple[Fault, ...]]:
    """Schedules one step simpler than ``schedule``, simplest first: each with one fault
    fewer (latest first), then each with one fault simplified. ``pinned``: the scenario's
    own faults, by id (a search around them), are never dropped and only ever put back as
    written."""
    pinned = pinned or {}

    def ordered(faults: Sequence[Fault]) -> tuple[Fault, ...]:
        return tuple(sorted(faults, key=lambda x: x.at))

    out: list[tuple[Fault, ...]] = []
    for i, f in enumerate(schedule):
        own = pinned.get(f.id)
        if own is not None and own != f:
            out.append(ordered((*schedule[:i], own, *schedule[i + 1:])))
    for i in reversed(range(len(schedule))):
        if schedule[i].id not in pinned:
            out.append(tuple(schedule[:i]) + tuple(schedule[i + 1:]))
    for i, f in enumerate(schedule):
        if f.id in pinned:
            continue
        for g in simpler_faults(f):
            out.append(ordered((*schedule[:i], g, *schedule[i + 1:])))
    return out


def schedule_size(schedule: Sequence[Fault], pinned: Mapping[str, Fault] | None = None
                  ) -> tuple[int, int, int, float, int]:
    """How complex a schedule is: fewer faults, then fewer of the scenario's own faults
    moved (``pinned``, by id), then fewer triggers, then less fault time, then fewer
    hosts."""
    pinned = pinned or {}
    time = sum(f.at + float(getattr(unwrap(f), "duration", None) or 0.0) for f in schedule)
    triggered = sum(1 for f in schedule if isinstance(f, Triggered))
    moved = sum(1 for f in schedule if f.id in pinned and pinned[f.id] != f)
    return (len(schedule), moved, triggered, round(time, 6),
            sum(len(f.hosts()) for f in schedule))


__all__ = [
    "DEFAULT_TYPES",
    "FAULT_TYPES",
    "Chooser",
    "FaultSpace",
    "RandomChooser",
    "draw_one",
    "draw_schedule",
    "draw_time",
    "random_schedule",
    "schedule_size",
    "shrink_candidates",
    "simpler_faults",
]
