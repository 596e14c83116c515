"""explore's tasks, as the campaign executor (:mod:`elastic_sim.campaign`) runs them.

Every worker gets the search (scenario, checks to ignore, seed, fault space) once, as the
campaign's context; after that a task is a range of case indices, and the worker draws
each case itself (:func:`~elastic_sim.cases.make_case` is a pure function of seed and
index) and sends back only what the checks said. So no scenario or schedule is pickled
per case, and the workers are kept busy: ranges are handed out ahead of the one being
read, and outcomes come back in index order whatever the number of workers (the findings
never depend on it). A shrink is one task too: a case and the violations it showed,
shrunk by one worker (:func:`~elastic_sim.shrinking.shrink_case`) while the others go on
with the search or with other shrinks. Every task reports the seconds it ran, so a
search can tell how busy its workers were.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from elastic_sim.campaign import Executor, interrupted
from elastic_sim.cases import Case, Outcome, Signature, make_case, run_case
from elastic_sim.faults.schedule import FaultSpace
from elastic_sim.scenario import Scenario
from elastic_sim.shrinking import Shrunk, shrink_case
from elastic_sim.variation import Vary

T = TypeVar("T")

CHUNK = 8
"""Case indices per task: large enough that a task's pickling and wake-up are noise next
to its runs, small enough that the workers finish a search at nearly the same time."""


@dataclass(frozen=True)
class Search:
    """What a worker needs to draw case ``i`` of a search by itself, and judge it."""

    sc: Scenario
    ignore: tuple[str, ...]
    seed: int
    space: FaultSpace
    ties: bool
    varies: tuple[Vary, ...] = ()
    """Knob and cluster values drawn per case (``explore --vary``)."""

    def case(self, i: int) -> Case:
        """Case ``i`` of the search."""
        return make_case(self.seed, i, self.space, self.ties, self.varies)


@dataclass(frozen=True)
class Verdict:
    """What a worker sends back for one drawn case (the main process redraws the case)."""

    index: int
    signatures: list[Signature]
    messages: dict[Signature, str]
    hung: bool


@dataclass
class Spent:
    """Seconds spent on tasks: wall-clock, and CPU time of the process that ran them (less
    than wall-clock where other processes took the CPU)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0

    def add(self, other: Spent) -> None:
        """Count ``other`` in."""
        self.wall_s += other.wall_s
        self.cpu_s += other.cpu_s


def timed(fn: Callable[..., T], *args: Any) -> tuple[T, Spent]:
    """``fn(*args)`` and the time it took."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn(*args)
    return value, Spent(time.perf_counter() - wall, time.process_time() - cpu)


def _verdicts(s: Search, start: int, stop: int) -> list[Verdict]:
    out = []
    for i in range(start, stop):
        o = run_case(s.sc, s.case(i), s.ignore)
        out.append(Verdict(i, o.signatures, o.messages, o.hung))
    return out


def run_range(s: Search, start: int, stop: int) -> tuple[list[Verdict], Spent]:
    """The verdicts of the search's cases ``start`` to ``stop - 1`` (a task), and the time
    they took."""
    return timed(_verdicts, s, start, stop)


def shrink_task(s: Search, case: Case, targets: list[Signature]) -> tuple[list[Shrunk], Spent]:
    """:func:`~elastic_sim.shrinking.shrink_case` (a task), and the time it took."""
    return timed(shrink_case, s.sc, s.ignore, case, targets)


@dataclass
class Busy:
    """Time the workers spent running tasks, by kind (the rest of workers x wall time
    they were starting, idle or waiting on this process)."""

    search: Spent = field(default_factory=Spent)
    shrink: Spent = field(default_factory=Spent)


class CaseRunner:
    """Runs the cases of one search, in order, and its shrinks, on the campaign executor
    (this process, local workers, or Ray)."""

    def __init__(self, search: Search, workers: int = 1, ray: str | None = None) -> None:
        self.search = search
        self.executor = Executor(search, workers, ray)
        self.workers = self.executor.workers
        self.busy = Busy()

    def submit_shrink(self, case: Case, targets: list[Signature]) -> Any:
        """Shrink ``targets``, violations ``case`` showed, as one task; a handle (here,
        with one worker: shrunk now)."""
        return self.executor.submit(shrink_task, case, targets)

    def ready(self, handle: Any) -> bool:
        """Whether a shrink task has finished (:meth:`shrunk` would not wait)."""
        return self.executor.ready(handle)

    def shrunk(self, handle: Any) -> list[Shrunk]:
        """What a shrink task found (waits for it)."""
        found, spent = self.executor.result(handle)
        self.busy.shrink.add(spent)
        return list(found)

    def drawn(self, budget: int | None) -> Iterator[Outcome]:
        """Outcomes of cases 0, 1, ... (``budget`` of them; None: until the caller stops)
        of the search, in index order."""
        s = self.search
        if self.executor.local:
            for i in range(budget) if budget is not None else itertools.count():
                interrupted()
                out, spent = timed(run_case, s.sc, s.case(i), s.ignore)
                self.busy.search.add(spent)
                yield out
            return
        starts = range(0, budget, CHUNK) if budget is not None else itertools.count(0, CHUNK)
        ranges = ((start, start + CHUNK if budget is None else min(start + CHUNK, budget))
                  for start in starts)
        for verdicts, spent in self.executor.map(run_range, ranges):
            self.busy.search.add(spent)
            for v in verdicts:
                yield Outcome(s.case(v.index), v.signatures, v.messages, v.hung)

    def close(self) -> None:
        """Stop the workers (tasks handed out ahead are dropped)."""
        self.executor.close()
