"""Swarm testing: before a schedule is drawn, which fault types and which hosts it may use
are drawn (each kept with even odds, at least one of each), so most schedules hold a few
kinds of fault aimed at a few hosts, and a mechanism that two kinds reach together, or
that needs one host spared, is not drowned by the others (Groce et al., "Swarm Testing",
ISSTA 2012). Every choice goes through the :class:`~elastic_sim.faults.schedule.Chooser`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from elastic_sim.faults.schedule import Chooser, FaultSpace

T = TypeVar("T")


def _subset(c: Chooser, items: Sequence[T]) -> tuple[T, ...]:
    """Each item kept with even odds (kept is the simplest), at least one."""
    kept = tuple(x for x in items if c.integer(0, 1) == 0)
    return kept or (items[c.integer(0, len(items) - 1)],)


def swarm(c: Chooser, space: FaultSpace) -> FaultSpace:
    """``space`` narrowed to a drawn subset of its fault types and of its hosts faults
    may aim at (the cluster stays whole: a cut still divides every host)."""
    return replace(space, types=_subset(c, space.types), targets=_subset(c, space.aimable))


__all__ = ["swarm"]
