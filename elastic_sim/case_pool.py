"""Running an exploration's cases, on this process or on a pool of worker processes.

Each worker gets the scenario, the search's seed and its fault space once, when it starts;
after that a task is a range of case indices, and the worker draws each case itself
(:func:`~elastic_sim.cases.make_case` is a pure function of seed and index) and sends
back only what the checks said. So no scenario or schedule is pickled per case, and the
pool is kept busy: ranges are handed out ahead of the one being read, and outcomes come
back in index order whatever the number of workers (the findings never depend on it).
A shrink is one task too: a case and the violations it showed, shrunk by one worker
(:func:`~elastic_sim.shrinking.shrink_case`) while the others go on with the search or
with other shrinks. Every task reports the seconds it ran, so a search can tell how
busy its workers were.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, TypeVar

from elastic_sim.cases import Case, Outcome, Signature, make_case, run_case
from elastic_sim.faults.schedule import FaultSpace
from elastic_sim.scenario import Scenario
from elastic_sim.shrinking import Shrunk, shrink_case
from elastic_sim.variation import Vary

T = TypeVar("T")

CHUNK = 8
"""Case indices per task: large enough that a task's pickling and wake-up are noise next
to its runs, small enough that the workers finish a search at nearly the same time."""
AHEAD = 3
"""Tasks handed out per worker beyond the one being read (none idles between tasks)."""


@dataclass(frozen=True)
class Search:
    """What a worker needs to draw case ``i`` of a search by itself."""

    seed: int
    space: FaultSpace
    ties: bool
    varies: tuple[Vary, ...] = ()
    """Knob and cluster values drawn per case (``explore --vary``)."""


@dataclass(frozen=True)
class Verdict:
    """What a worker sends back for one drawn case (the main process redraws the case)."""

    index: int
    signatures: list[Signature]
    messages: dict[Signature, str]
    hung: bool


_WORKER: tuple[Scenario, tuple[str, ...], Search | None] | None = None


def _init_worker(sc: Scenario, ignore: tuple[str, ...], search: Search | None) -> None:
    global _WORKER
    _WORKER = (sc, ignore, search)


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


def _verdicts(sc: Scenario, ignore: tuple[str, ...], s: Search, start: int,
              stop: int) -> list[Verdict]:
    out = []
    for i in range(start, stop):
        o = run_case(sc, make_case(s.seed, i, s.space, s.ties, s.varies), ignore)
        out.append(Verdict(i, o.signatures, o.messages, o.hung))
    return out


def run_range(sc: Scenario, ignore: tuple[str, ...], s: Search, start: int,
              stop: int) -> tuple[list[Verdict], Spent]:
    """The verdicts of the search's cases ``start`` to ``stop - 1`` (a worker's task), and
    the time they took."""
    return timed(_verdicts, sc, ignore, s, start, stop)


def shrink_task(sc: Scenario, ignore: tuple[str, ...], case: Case,
                targets: list[Signature]) -> tuple[list[Shrunk], Spent]:
    """:func:`~elastic_sim.shrinking.shrink_case` (a worker's task), and the time it took."""
    return timed(shrink_case, sc, ignore, case, targets)


def _run_range(start: int, stop: int) -> tuple[list[Verdict], Spent]:
    assert _WORKER is not None
    sc, ignore, s = _WORKER
    assert s is not None
    return run_range(sc, ignore, s, start, stop)


def _shrink(case: Case, targets: list[Signature]) -> tuple[list[Shrunk], Spent]:
    assert _WORKER is not None
    sc, ignore, _ = _WORKER
    return shrink_task(sc, ignore, case, targets)


def start_method() -> str:
    """How worker processes start: forked on Linux while this process runs no other
    thread (a fork copies the imported modules: about 0.1 s for two workers, where two
    spawned interpreters take seconds to import everything again, time a small search
    feels); spawned otherwise (a forked child could inherit a lock another thread holds,
    and macOS's system libraries do not survive a fork)."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn"


@dataclass
class Busy:
    """Time the workers spent running tasks, by kind (the rest of workers x wall time
    they were starting, idle or waiting on this process)."""

    search: Spent = field(default_factory=Spent)
    shrink: Spent = field(default_factory=Spent)


class CaseRunner:
    """Runs the cases of one search, in order, on this process (one worker) or a pool."""

    def __init__(self, sc: Scenario, workers: int, ignore: Collection[str] = (),
                 search: Search | None = None) -> None:
        self.sc = sc
        self.workers = workers
        self.ignore = tuple(ignore)
        self.search = search
        self.busy = Busy()
        self.pool: ProcessPoolExecutor | None = None
        if workers > 1:
            self.pool = ProcessPoolExecutor(
                workers, mp_context=get_context(start_method()), initializer=_init_worker,
                initargs=(sc, self.ignore, search),
            )

    def submit_shrink(self, case: Case, targets: list[Signature]) -> Any:
        """Shrink ``targets``, violations ``case`` showed, as one task; a handle (with one
        worker: shrunk here, now)."""
        if self.pool is None:
            return shrink_task(self.sc, self.ignore, case, targets)
        return self.pool.submit(_shrink, case, targets)

    def ready(self, handle: Any) -> bool:
        """Whether a shrink task has finished (:meth:`shrunk` would not wait)."""
        return not isinstance(handle, Future) or handle.done()

    def shrunk(self, handle: Any) -> list[Shrunk]:
        """What a shrink task found (waits for it)."""
        result: tuple[list[Shrunk], Spent] = (handle.result() if isinstance(handle, Future)
                                              else handle)
        self.busy.shrink.add(result[1])
        return result[0]

    def local(self) -> bool:
        """Whether cases run on this process (no workers elsewhere)."""
        return self.pool is None

    def submit_range(self, start: int, stop: int) -> Any:
        """Hand the search's cases ``start`` to ``stop - 1`` to a worker; a handle."""
        assert self.pool is not None
        return self.pool.submit(_run_range, start, stop)

    def verdicts(self, handle: Any) -> list[Verdict]:
        """What a handed-out range found (waits for it)."""
        result: tuple[list[Verdict], Spent] = handle.result()
        self.busy.search.add(result[1])
        return result[0]

    def drawn(self, budget: int | None) -> Iterator[Outcome]:
        """Outcomes of cases 0, 1, ... (``budget`` of them; None: until the caller stops)
        of the search this runner was made for, in index order."""
        s = self.search
        if s is None:
            raise ValueError("this runner was made without a search")
        indices = range(budget) if budget is not None else itertools.count()
        if self.local():
            for i in indices:
                out, spent = timed(run_case, self.sc,
                                   make_case(s.seed, i, s.space, s.ties, s.varies), self.ignore)
                self.busy.search.add(spent)
                yield out
            return
        starts: Iterator[int] = (iter(range(0, budget, CHUNK)) if budget is not None
                                 else itertools.count(0, CHUNK))
        end = budget
        queue: deque[Any] = deque()

        def submit() -> None:
            start = next(starts, None)
            if start is not None:
                stop = start + CHUNK if end is None else min(start + CHUNK, end)
                queue.append(self.submit_range(start, stop))

        for _ in range(self.workers * (1 + AHEAD)):
            submit()
        while queue:
            verdicts = self.verdicts(queue.popleft())
            submit()
            for v in verdicts:
                yield Outcome(make_case(s.seed, v.index, s.space, s.ties, s.varies), v.signatures,
                              v.messages, v.hung)

    def close(self) -> None:
        """Stop the worker processes (tasks handed out ahead are dropped)."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
