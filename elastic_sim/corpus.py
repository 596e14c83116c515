"""Coverage-guided search: the corpus of cases that reached something new (an abstract state,
a transition, a fault firing, a mechanism: :mod:`elastic_sim.coverage`) and the planner
that draws each case either fresh (:mod:`elastic_sim.draws`) or as a mutation of a corpus
entry (add, remove, shift, stretch or retarget a fault, fire it at an event the entry's
run reached, move one of the scenario's own faults within its bounds, another tie seed or
sim seed).

A search stays a pure function of (scenario, seed, budget) whatever runs it: cases come
in batches of :data:`BATCH`, and every case of batch ``b`` is drawn from the corpus as
it stood once batches ``0 .. b - LAG`` were all judged (their outcomes taken in index
order). So case ``i`` never depends on how many workers ran the cases before it, and the
workers have up to :data:`LAG` batches to run while the planner waits for the oldest.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from elastic_sim.cases import Case, Outcome
from elastic_sim.draws import Search, room
from elastic_sim.faults.around import move
from elastic_sim.faults.model import ENDS_A_HOST, Fault
from elastic_sim.faults.schedule import FaultSpace, RandomChooser, draw_one
from elastic_sim.faults.triggers import EventTrigger, Triggered, unwrap
from elastic_sim.variation import shaped
from elastic_sim.weighted import pick_weighted

BATCH = 8
"""Cases drawn from one state of the corpus."""
LAG = 2
"""Batches that may be drawn ahead of the oldest batch not yet judged."""
MUTATE = 0.5
"""Odds that a case (once the corpus has an entry) is a mutation rather than fresh."""
TRIGGER_POOL = 96
"""Most events of earlier runs a fresh case's faults may fire at (on top of the fault-free
run's)."""
MAX_SHIFT = 5.0
"""Most seconds a mutation moves a fault."""


@dataclass(frozen=True)
class Entry:
    """A case that reached something new: what it reached first, and the events of its
    run its mutations may fire faults at."""

    case: Case
    new: int
    triggers: tuple[EventTrigger, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The corpus as cases of one batch see it."""

    entries: tuple[Entry, ...] = ()
    triggers: tuple[EventTrigger, ...] = ()


@dataclass
class Planner:
    """Draws the search's cases (fresh or mutated) and learns from their outcomes, taken
    in index order (:meth:`observe`). ``search`` draws a fresh case
    (:meth:`elastic_sim.draws.Search.fresh`) and holds the space and bounds."""

    search: Search
    guided: bool = True
    seen: set[str] = field(default_factory=set)
    """Everything reached so far."""
    first: dict[str, int] = field(default_factory=dict)
    """Each thing reached, by the index of the case that reached it first."""
    entries: list[Entry] = field(default_factory=list)
    triggers: dict[EventTrigger, None] = field(default_factory=dict)
    observed: int = 0
    mutated: int = 0
    """Cases drawn as mutations."""
    snapshots: dict[int, Snapshot] = field(default_factory=dict)

    def ready(self, i: int) -> bool:
        """Whether case ``i`` can be drawn now (the batches it is drawn after are in)."""
        b = i // BATCH
        return not self.guided or b < LAG or self.observed >= (b - LAG + 1) * BATCH

    def case(self, i: int) -> Case:
        """Case ``i`` (:meth:`ready` must be true)."""
        snap = self.snapshots.get(i // BATCH, Snapshot()) if self.guided else Snapshot()
        rng = random.Random(f"{self.search.seed}/plan/{i}")
        s = self.search
        if snap.entries and rng.random() < MUTATE:
            case = mutated(s, _pick(rng, snap.entries), i, rng)
            self.mutated += 1
        else:
            space = s.space
            if snap.triggers:
                space = dataclasses.replace(space, triggers=(*space.triggers, *snap.triggers))
            case = s.fresh(i, space)
        return room(case, s.sc.run_time_limit(), s.progress_s)

    def observe(self, out: Outcome) -> set[str]:
        """Learn from the next outcome in index order; what it reached first."""
        new = set(out.reached) - self.seen
        self.seen |= new
        for item in new:
            self.first[item] = out.case.index
        if new and self.guided:
            self.entries.append(Entry(out.case, len(new), out.triggers))
            for t in out.triggers:
                self.triggers.setdefault(t, None)
        self.observed += 1
        if self.observed % BATCH == 0:
            pool = tuple(self.triggers)[:TRIGGER_POOL]
            self.snapshots[self.observed // BATCH + LAG - 1] = Snapshot(tuple(self.entries),
                                                                        pool)
        return new


@dataclass
class Fixed:
    """A planner over a given list of cases (the replays of ``explore --exhaustive``):
    each as it is, renumbered in order; what they reach is recorded, nothing is mutated."""

    cases: Sequence[Case]
    seen: set[str] = field(default_factory=set)
    first: dict[str, int] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    mutated: int = 0

    def ready(self, i: int) -> bool:
        """Always: no case depends on another."""
        return True

    def case(self, i: int) -> Case:
        """Case ``i`` of the list."""
        return dataclasses.replace(self.cases[i], index=i)

    def observe(self, out: Outcome) -> set[str]:
        """What ``out`` reached first."""
        new = set(out.reached) - self.seen
        self.seen |= new
        for item in new:
            self.first[item] = out.case.index
        return new


def _pick(rng: random.Random, entries: Sequence[Entry]) -> Entry:
    """An entry, with odds by how much it reached first."""
    return pick_weighted(rng, entries, lambda e: e.new)


OPS = ("add", "remove", "shift", "stretch", "retarget", "trigger", "move", "ties", "seed")


def mutated(s: Search, parent: Entry, i: int, rng: random.Random) -> Case:
    """Case ``i``: ``parent``'s case with one to three mutations (a mutation that would
    break the space's limits is skipped)."""
    base = parent.case
    variation = tuple((p, v) for p, v in base.variation if p != "time_limit")
    space = shaped(s.space, variation)
    space = dataclasses.replace(space, triggers=(*space.triggers, *parent.triggers))
    c = RandomChooser(rng)
    faults = list(base.faults)
    seed, tie = base.seed, base.tie_seed
    pinned = s.pinned
    for k in range(rng.randint(1, 3)):
        op = OPS[rng.randrange(len(OPS))]
        if op == "ties":
            if s.ties:
                tie = rng.randrange(2**32)
            continue
        if op == "seed":
            seed = rng.randrange(2**32)
            continue
        before = list(faults)
        _mutate(op, faults, c, rng, space, pinned, s, parent.triggers, f"m{i}.{k}")
        if not _allowed(faults, space, pinned):
            faults = before
    faults.sort(key=lambda f: f.at)
    return Case(i, tuple(faults), seed, tie, variation)


def _mutate(op: str, faults: list[Fault], c: RandomChooser, rng: random.Random,
            space: FaultSpace, pinned: dict[str, Fault], s: Search,
            triggers: Sequence[EventTrigger], prefix: str) -> None:
    """Apply one mutation to ``faults`` in place (nothing where it does not apply)."""
    own = [j for j, f in enumerate(faults) if f.id not in pinned]
    if op == "add":
        f = draw_one(c, space, prefix)
        if f is not None:
            faults.append(f)
        return
    if op == "move":
        mine = [j for j, f in enumerate(faults) if f.id in pinned]
        if mine and s.around is not None:
            j = mine[rng.randrange(len(mine))]
            faults[j] = move(c, pinned[faults[j].id], s.around, space.hosts)
        return
    if not own:
        return
    j = own[rng.randrange(len(own))]
    f = faults[j]
    inner = unwrap(f)
    if op == "remove":
        del faults[j]
    elif op == "shift" and not isinstance(f, Triggered):
        at = min(max(0.0, f.at + rng.uniform(-MAX_SHIFT, MAX_SHIFT)), space.horizon)
        faults[j] = dataclasses.replace(f, at=round(at, 3))
    elif op == "stretch" and isinstance(getattr(inner, "duration", None), float):
        d = inner.duration * 2 ** rng.uniform(-1, 1)  # type: ignore[attr-defined]
        d = round(min(max(d, space.min_duration), space.max_duration), 3)
        faults[j] = _inner(f, dataclasses.replace(inner, duration=d))  # type: ignore[call-arg]
    elif op == "retarget" and isinstance(getattr(inner, "host", None), str) \
            and "host" not in type(inner).derived and inner.host:  # type: ignore[attr-defined]
        host = space.aimable[rng.randrange(len(space.aimable))]
        changes: dict[str, object] = {"host": host}
        proc = getattr(inner, "proc", "")
        if isinstance(proc, str) and proc:
            changes["proc"] = f"{host}/{proc.partition('/')[2]}"
        faults[j] = _inner(f, dataclasses.replace(inner, **changes))  # type: ignore[arg-type]
    elif op == "trigger":
        if isinstance(f, Triggered):
            faults[j] = dataclasses.replace(inner, at=f.at)
        elif triggers:
            when = triggers[rng.randrange(len(triggers))]
            faults[j] = Triggered(f.id, f.at, dataclasses.replace(f, at=0.0), when)


def _inner(f: Fault, inner: Fault) -> Fault:
    """``f`` with its acting fault replaced (itself, or a trigger's inner fault)."""
    return dataclasses.replace(f, fault=inner) if isinstance(f, Triggered) else inner


def _allowed(faults: Sequence[Fault], space: FaultSpace, pinned: dict[str, Fault]) -> bool:
    """Whether a mutated schedule keeps the space's limits: its hosts, spares, crashes
    and number of faults."""
    if sum(1 for f in faults if f.id not in pinned) > space.max_faults + 2:
        return False
    lost: set[str] = set()
    for f in faults:
        if any(h not in space.hosts for h in f.hosts()):
            return False
        if isinstance(unwrap(f), ENDS_A_HOST) and f.id not in pinned:
            if any(h in space.spare for h in f.hosts()):
                return False
            lost.update(f.hosts())
    return space.max_crashes is None or len(lost) <= space.max_crashes

__all__ = ["BATCH", "LAG", "Entry", "Fixed", "Planner", "Snapshot", "mutated"]
