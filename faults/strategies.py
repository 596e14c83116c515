"""Hypothesis strategies for fault schedules and for the simulator's random choices.

Every choice of a generated run comes from the Hypothesis draw: the schedule through
:func:`faults.schedule.draw_schedule` (the same generator ``explore`` uses), and the sim's
own randomness (failure-detection delays and other seeded sub-streams, which is also how the
sim breaks the ties it randomises) through the run seed. So Hypothesis shrinks both.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from faults.model import Fault
from faults.schedule import FaultSpace, draw_schedule

MAX_SEED = 2**32 - 1


class DrawChooser:
    """A :class:`~faults.schedule.Chooser` that draws each choice from Hypothesis."""

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
    """Seeds of the simulator's random streams (how it breaks ties and draws delays)."""
    return st.integers(0, MAX_SEED)


@dataclass(frozen=True)
class GeneratedRun:
    """One generated run: the fault schedule and the sim seed."""

    faults: tuple[Fault, ...]
    seed: int


@st.composite
def generated_runs(draw: st.DrawFn, space: FaultSpace) -> GeneratedRun:
    """A fault schedule together with a sim seed."""
    return GeneratedRun(draw(fault_schedules(space)), draw(sim_seeds()))
