"""A search's fresh cases: drawn from the search's seed and the case's index alone (and the
space the search offers it), never from another case's run.

Case ``i`` draws its knobs and cluster shape (``--vary``) from the stream
``<seed>/vary/<i>``; with ``swarm``, which fault types and hosts it may use, and whether
a host joins late, from ``<seed>/swarm/<i>`` (:mod:`elastic_sim.faults.swarm`); its
schedule from ``<seed>/schedule/<i>``; around a scenario's own faults, how each of them
moves, from ``<seed>/around/<i>`` (:mod:`elastic_sim.faults.around`); its sim seed and
tie seed from ``<seed>/sim/<i>`` and ``<seed>/ties/<i>``. A case whose faults last longer
than the scenario's time limit leaves room to recover is given a longer one
(:func:`room`), written into its reproducer with its variation.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from elastic_sim.cases import Case
from elastic_sim.faults.around import Around, around_schedule
from elastic_sim.faults.model import Fault
from elastic_sim.faults.schedule import FaultSpace, RandomChooser, draw_schedule
from elastic_sim.faults.swarm import swarm as swarm_space
from elastic_sim.faults.triggers import unwrap
from elastic_sim.scenario import Scenario
from elastic_sim.variation import LATE, Variation, Vary, draw_variation, shaped

LATE_ODDS = 4
"""One swarm in this many has a host join late (after the first round formed)."""
LIMIT_STEP = 300.0
"""A longer time limit is a multiple of this (seconds), so cases share few of them."""


@dataclass(frozen=True)
class Search:
    """A search, as every worker gets it once: the scenario and what its cases are drawn
    from and judged by."""

    sc: Scenario
    ignore: tuple[str, ...]
    seed: int
    space: FaultSpace
    ties: bool
    varies: tuple[Vary, ...] = ()
    """Knob and cluster values drawn per case (``explore --vary``)."""
    around: Around | None = None
    """The scenario's own faults, kept in every case (None: ``--replace``)."""
    swarm: bool = True
    progress_s: float = 0.0
    """The protocol's bound on progress after a fault heals (a case's time limit leaves
    room for it)."""

    @property
    def pinned(self) -> dict[str, Fault]:
        """The scenario's own faults by id (none with ``--replace``)."""
        return self.around.by_id if self.around is not None else {}

    def fresh(self, i: int, space: FaultSpace | None = None) -> Case:
        """Case ``i`` drawn fresh, over ``space`` (default: the search's)."""
        return make_case(self.seed, i, space or self.space, self.ties, self.varies,
                         around=self.around, swarm=self.swarm)

    def case(self, i: int) -> Case:
        """Case ``i`` drawn fresh, with the room its faults need."""
        return room(self.fresh(i), self.sc.run_time_limit(), self.progress_s)


def make_case(seed: int, index: int, space: FaultSpace, ties: bool = False,
              varies: Sequence[Vary] = (), *, around: Around | None = None,
              swarm: bool = False) -> Case:
    """Case ``index`` of the search with seed ``seed`` (with ``ties``: a tie seed too;
    with ``varies``: knob and cluster values too; ``around``: the scenario's own faults,
    each kept or moved; ``swarm``: drawn over a drawn part of the space)."""
    variation: Variation = draw_variation(f"{seed}/vary/{index}", varies) if varies else ()
    sub = shaped(space, variation)
    if swarm:
        c = RandomChooser(random.Random(f"{seed}/swarm/{index}"))
        sub = swarm_space(c, sub)
        variation = (*variation, *late_joiner(c, sub))
    faults = draw_schedule(RandomChooser(random.Random(f"{seed}/schedule/{index}")), sub)
    if around is not None and around.faults:
        own = around_schedule(RandomChooser(random.Random(f"{seed}/around/{index}")),
                              around, sub.hosts)
        faults = merged(own, faults)
    sim_seed = random.Random(f"{seed}/sim/{index}").randrange(2**32)
    tie_seed = random.Random(f"{seed}/ties/{index}").randrange(2**32) if ties else None
    return Case(index, faults, sim_seed, tie_seed, variation)


def late_joiner(c: RandomChooser, space: FaultSpace) -> Variation:
    """One host in :data:`LATE_ODDS` swarms starts after the first round formed (no
    start-up window known: none)."""
    if space.startup <= 0 or len(space.hosts) < 2 or c.integer(0, LATE_ODDS - 1) != 1:
        return ()
    host = space.aimable[c.integer(0, len(space.aimable) - 1)]
    lo, hi = round(space.startup * 1000), max(round(space.startup * 1000),
                                              round(space.horizon * 1000))
    return ((f"{LATE}{host}", c.integer(lo, hi) / 1000),)


def merged(own: Sequence[Fault], drawn: Sequence[Fault]) -> tuple[Fault, ...]:
    """The scenario's faults and the drawn ones in time order, a drawn fault's id changed
    where it would repeat one of the scenario's."""
    taken = {f.id for f in own}
    fresh = [f if f.id not in taken else replace(f, id=f"s-{f.id}") for f in drawn]
    return tuple(sorted((*own, *fresh), key=lambda f: f.at))


def room(case: Case, time_limit: float, progress_s: float) -> Case:
    """``case`` with a time limit long enough for its last fault to heal and the job to
    progress after it (``progress_s``, the protocol's bound), where the scenario's
    ``time_limit`` is not: a multiple of :data:`LIMIT_STEP`."""
    late = max((_last_heal(f) for f in case.faults), default=0.0)
    starts = [float(v) for p, v in case.variation if p.startswith(LATE)]
    late = max(late, *starts) if starts else late
    need = late + progress_s
    if need <= time_limit:
        return case
    limit = math.ceil(need / LIMIT_STEP) * LIMIT_STEP
    kept = tuple((p, v) for p, v in case.variation if p != "time_limit")
    return replace(case, variation=(*kept, ("time_limit", limit)))


def _last_heal(f: Fault) -> float:
    inner = unwrap(f)
    heals = inner.heals_at if inner is f else None
    duration = getattr(inner, "duration", None)
    if heals is None and isinstance(duration, float):
        heals = f.at + duration  # triggered: from its watch time, a lower bound
    return heals if heals is not None else f.at


__all__ = ["LATE_ODDS", "Search", "late_joiner", "make_case", "merged", "room"]
