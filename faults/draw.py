"""How one fault of any type is drawn, from its class alone: each field of the class is
drawn by what it is (a host, a side of a cut, a duration, a probability, one of a set of
literals), so a new fault type is drawable the moment it is defined.

Every choice goes through the :class:`~elastic_sim.faults.schedule.Chooser`, so Hypothesis shrinks
it and a seeded search repeats it; the first alternative of each choice is the simplest (what
a choice shrinks to).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

from elastic_sim.faults.model import (
    ENDS_A_HOST,
    Bridge,
    Fault,
    GpuWedge,
    LinkFault,
    OneWayPartition,
    Partition,
    Placement,
    Wedge,
)

if TYPE_CHECKING:
    from elastic_sim.faults.schedule import Chooser, FaultSpace

CLOCK_STEPS = (5.0, -5.0, 60.0, -60.0, 3600.0, -3600.0)
"""Clock offsets and jumps drawn (seconds), smallest first."""

ACTIVITIES = ("main", "keep-alive", "agent.invoke_run", "discovery", "notification_service",
              "dispatch")
"""Activities a wedge is drawn for: every process's ``main`` and the tasks the shipped
protocols name (one a process does not run is skipped, saying which it runs)."""

LINK_MAX = 1.0
"""Longest extra link delay or reordering drawn (seconds)."""


def _ms(c: Chooser, lo: float, hi: float) -> float:
    lo_ms, hi_ms = round(lo * 1000), max(round(lo * 1000), round(hi * 1000))
    return c.integer(lo_ms, hi_ms) / 1000


def _pick(c: Chooser, items: Sequence[Any]) -> Any:
    return items[c.integer(0, len(items) - 1)]


SHORT = 10.0
"""Seconds: the shortest of the duration ranges drawn from."""


def draw_duration(c: Chooser, s: FaultSpace) -> float:
    """How long a fault lasts, in whole milliseconds: short (up to :data:`SHORT` s, the
    simplest), anywhere up to the space's longest, or just short of or past one of the
    protocol's own timeouts (0.8 to 1.5 times it), so that faults outlast a timeout as
    often as they fall within one."""
    top = s.max_duration
    how = c.integer(0, 2 if s.timescales else 1)
    if how == 0:
        return _ms(c, s.min_duration, min(SHORT, top))
    if how == 1:
        return _ms(c, s.min_duration, top)
    scale = _pick(c, s.timescales)
    lo = min(max(s.min_duration, 0.8 * scale), top)
    return _ms(c, lo, min(max(lo, 1.5 * scale), top))


def _split(c: Chooser, hosts: Sequence[str], sides: int) -> list[tuple[str, ...]] | None:
    """``sides`` disjoint non-empty sides drawn from ``hosts`` (each host on at most one
    side; what is left over is on none), in the hosts' order within a side."""
    if len(hosts) < sides:
        return None
    pool = list(hosts)
    out: list[list[str]] = [[] for _ in range(sides)]
    for side in out:  # one host each first, so no side is empty
        side.append(pool.pop(c.integer(0, len(pool) - 1)))
    for h in list(pool):
        where = c.integer(0, sides)  # == sides: on no side
        if where < sides:
            out[where].append(h)
    order = {h: i for i, h in enumerate(hosts)}
    return [tuple(sorted(s, key=order.__getitem__)) for s in out]


def _plain(annotation: Any) -> tuple[Any, bool]:
    """The annotation without Annotated metadata, and whether None is allowed."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    args = typing.get_args(annotation)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return _plain(rest[0])[0], True
    return annotation, False


def _value(c: Chooser, s: FaultSpace, cls: type[Fault], name: str, annotation: Any,
           host: str) -> Any:
    kind, optional = _plain(annotation)
    if optional and c.integer(0, 1) == 0:
        return None
    if typing.get_origin(kind) is Literal:
        return _pick(c, typing.get_args(kind))
    if name in ("a", "b"):
        return _pick(c, ("*", *s.aimable))
    if name == "proc":
        procs = [p for p in s.procs if p.partition("/")[0] == host] or [f"{host}/{s.proc_name}"]
        if issubclass(cls, Wedge | GpuWedge):  # the simplest: every process of the host
            return "" if c.integer(0, 1) == 0 else _pick(c, procs)
        return _pick(c, procs)
    if name == "activity":
        return _pick(c, ACTIVITIES)
    if kind is int:
        return c.integer(1, 4)
    if name in ("loss", "duplicate"):
        return c.integer(0, 100) / 100
    if name == "factor":
        return float(c.integer(1, 10))
    if name in ("offset", "delta"):
        return _pick(c, CLOCK_STEPS)
    if name in ("delay", "reorder") and issubclass(cls, LinkFault):
        return _ms(c, 0.0, LINK_MAX)
    if kind is float:
        return draw_duration(c, s)
    raise TypeError(f"cannot draw field {name!r} ({annotation!r})")


def draw_fault(cls: type[Fault], c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault | None:
    """One fault of ``cls`` in space ``s`` (None when the space allows none of it)."""
    hints = get_type_hints(cls, include_extras=True)
    given: dict[str, Any] = {}
    host = ""
    fields = [f for f in dataclasses.fields(cls)
              if f.name not in ("id", "at") and f.name not in cls.derived]
    names = {f.name for f in fields}
    if "host" in names or "proc" in names:
        pool = [h for h in s.aimable if not (issubclass(cls, ENDS_A_HOST) and h in s.spare)]
        if not pool:
            return None
        host = _pick(c, pool)
        if "host" in names:
            given["host"] = host
    if "groups" in names:
        sides = _split(c, s.hosts, 2)  # a cut divides the whole cluster
        if sides is None or (issubclass(cls, Bridge) and len(s.hosts) < 3):
            return None
        if issubclass(cls, Bridge):
            left = [h for h in s.hosts if h not in sides[0] and h not in sides[1]]
            if not left:  # a bridge needs a host on neither side: take one from the bigger
                big = max(sides, key=len)
                if len(big) < 2:
                    return None
                left = [big[-1]]
                sides = [tuple(x for x in side if x != big[-1]) for side in sides]
            given["bridge"] = tuple(left)
        elif issubclass(cls, Partition):
            rest = tuple(h for h in s.hosts if h not in sides[0])
            sides = [sides[0], rest]  # a side against the rest, as the partition generator
        given["groups"] = tuple(sides)
    if issubclass(cls, OneWayPartition):
        sides = _split(c, s.hosts, 2)
        if sides is None:
            return None
        given["src"], given["dst"] = sides
    for f in fields:
        if f.name not in given:
            given[f.name] = _value(c, s, cls, f.name, hints[f.name], host)
    fault = cls(id=fid, at=at, **given)
    return fault.resolve(Placement(s.hosts, s.store_host or s.hosts[0]))


def generator(cls: type[Fault]) -> Callable[[Chooser, FaultSpace, str, float], Fault | None]:
    """The generator of fault type ``cls`` (for :data:`elastic_sim.faults.schedule.GENERATORS`)."""
    def draw(c: Chooser, s: FaultSpace, fid: str, at: float) -> Fault | None:
        return draw_fault(cls, c, s, fid, at)
    draw.__name__ = f"draw_{cls.scenario_type}"
    return draw
