"""Hypothesis strategies for fault schedules and for the simulator's random choices.

Every choice of a generated run comes from the Hypothesis draw: the schedule through
:func:`elastic_sim.faults.schedule.draw_schedule` (the same generator ``explore`` uses), the sim's
own randomness (failure-detection delays and other seeded sub-streams) through the run seed,
and the order of events due at the same time from different sources through the tie seed
(None: scheduling order, what it shrinks to). So Hypothesis shrinks all three.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from elastic_sim.faults.model import Fault
from elastic_sim.faults.schedule import FaultSpace, draw_schedule

MAX_SEED = 2**32 - 1


class DrawChooser:
    """A :class:`~elastic_sim.faults.schedule.Chooser` that draws each choice from Hypothesis."""

    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``, shrinking towards ``lo``."""
        return self._draw(st.integers(lo, hi))


@st.composite
def fault_schedules(draw: st.DrawFn, space: FaultSpace) -> tuple[Fault, ...]:
    """Schedules of up to ``space.max_faults`` faults; shrinks to fewer, earlier, shorter."""
    return draw_schedule(DrawChooser(draw), space)


def sim_seeds() -> st.SearchStrategy[int]:
    """Seeds of the simulator's random streams (how it draws delays and losses)."""
    return st.integers(0, MAX_SEED)


def tie_seeds() -> st.SearchStrategy[int | None]:
    """Seeds of the simulator's tie-breaking (the order of same-time events of different
    sources, :mod:`elastic_sim.sim.kernel`); shrinks to None, the scheduling order."""
    return st.none() | st.integers(0, MAX_SEED)


@dataclass(frozen=True)
class GeneratedRun:
    """One generated run: the fault schedule, the sim seed and the tie seed."""

    faults: tuple[Fault, ...]
    seed: int
    tie_seed: int | None = None


@st.composite
def generated_runs(draw: st.DrawFn, space: FaultSpace, ties: bool = False) -> GeneratedRun:
    """A fault schedule together with a sim seed and (with ``ties``) a tie seed; without,
    ties run in scheduling order, as in every run before tie seeds existed."""
    faults = draw(fault_schedules(space))
    seed = draw(sim_seeds())
    return GeneratedRun(faults, seed, draw(tie_seeds()) if ties else None)
