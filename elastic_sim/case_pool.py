"""explore's tasks, as the campaign executor (:mod:`elastic_sim.campaign`) runs them.

Every worker gets the search (:class:`~elastic_sim.draws.Search`: scenario, checks to
ignore, seed, fault space) once, as the campaign's context. The planner
(:class:`~elastic_sim.corpus.Planner`, in this process) draws each case; a task runs one
and sends back what the checks said and what its run covered. Outcomes come back in index
order whatever the number of workers, and the planner draws a case only from outcomes
before it (its batch's lag), so the findings never depend on the workers; tasks are handed
out ahead of the one being read, as far as the planner allows, so none idles.

A *find* is one task too: a case and the mechanisms it showed first, shrunk by one worker
(:func:`~elastic_sim.shrinking.shrink_case`), each with its reproducer written and run
there (:mod:`elastic_sim.reproducers`), while the others go on with the search. With a
wall-clock deadline (``--time``) a case task runs no case once it has passed, and a find
stops shrinking and writes its reproducer without running it, so a search ends within a
case of its time. Every task reports the seconds it ran, so a search can tell how busy its
workers were.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from elastic_sim.campaign import Executor, Handle, interrupted
from elastic_sim.cases import Case, Outcome, run_case
from elastic_sim.corpus import Fixed, Planner
from elastic_sim.draws import Search
from elastic_sim.mechanisms import Signature
from elastic_sim.reproducers import Reproducer, reproducer_scenario, write_reproducer
from elastic_sim.shrinking import Shrunk, shrink_case

T = TypeVar("T")

__all__ = ["AHEAD", "Busy", "CaseRunner", "Found", "Search", "Spent", "find_task",
           "run_cases", "timed"]

AHEAD = 3
"""Case tasks kept in flight per worker beyond the one being read."""


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


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.time() >= deadline


def _outcomes(s: Search, cases: list[Case], deadline: float | None) -> list[Outcome]:
    out = []
    for case in cases:
        if _past(deadline):
            break
        out.append(run_case(s.sc, case, s.ignore, observe=True))
    return out


def run_cases(s: Search, cases: list[Case], deadline: float | None = None
              ) -> tuple[list[Outcome], Spent]:
    """The outcomes of ``cases`` (a task; none run once the wall-clock ``deadline`` has
    passed), and the time they took."""
    return timed(_outcomes, s, cases, deadline)


@dataclass(frozen=True)
class Found:
    """One mechanism a find shrank, and its reproducer."""

    shrunk: Shrunk
    reproducer: Reproducer


def _find(s: Search, case: Case, targets: list[Signature], messages: list[str],
          names: list[str], deadline: float | None, out_dir: Path | None) -> list[Found]:
    shrunk = shrink_case(s.sc, s.ignore, case, targets, s.pinned, deadline)
    out = []
    for sh, message, name in zip(shrunk, messages, names, strict=True):
        repro = reproducer_scenario(s.sc, sh, message, len(case.faults), s.around, name)
        if out_dir is None:
            out.append(Found(sh, Reproducer(name, "")))
            continue
        out.append(Found(sh, write_reproducer(repro, out_dir, name, sh.signature, deadline)))
    return out


def find_task(s: Search, case: Case, targets: list[Signature], messages: list[str],
              names: list[str], deadline: float | None = None,
              out_dir: Path | None = None) -> tuple[list[Found], Spent]:
    """Shrink ``targets`` (mechanisms ``case`` showed first) and write each one's
    reproducer ``<out_dir>/<name>.yaml`` and run (a task), and the time it took."""
    return timed(_find, s, case, targets, messages, names, deadline, out_dir)


@dataclass
class Busy:
    """Time the workers spent running tasks, by kind (the rest of workers x wall time
    they were starting, idle or waiting on this process)."""

    search: Spent = field(default_factory=Spent)
    shrink: Spent = field(default_factory=Spent)


class CaseRunner:
    """Runs the cases of one search, in order, and its finds, on the campaign executor
    (this process, local workers, or Ray)."""

    def __init__(self, search: Search, workers: int = 1, ray: str | None = None) -> None:
        self.search = search
        self.executor = Executor(search, workers, ray)
        self.workers = self.executor.workers
        self.busy = Busy()

    def submit_find(self, case: Case, targets: list[Signature], messages: list[str],
                    names: list[str], deadline: float | None,
                    out_dir: Path | None) -> Handle:
        """Shrink ``targets``, mechanisms ``case`` showed, as one task writing their
        reproducers under ``out_dir``; a handle (here, with one worker: done now)."""
        if out_dir is None:
            return self.executor.submit(find_task, case, targets, messages, names, deadline)
        return self.executor.submit(find_task, case, targets, messages, names, deadline,
                                    out_dir=out_dir)

    def ready(self, handle: Handle) -> bool:
        """Whether a find task has finished (:meth:`found` would not wait)."""
        return self.executor.ready(handle)

    def found(self, handle: Handle) -> list[Found]:
        """What a find task found (waits for it)."""
        found, spent = self.executor.result(handle)
        self.busy.shrink.add(spent)
        return list(found)

    def outcomes(self, planner: Planner | Fixed, budget: int | None,
                 deadline: float | None = None) -> Iterator[Outcome]:
        """Outcomes of cases 0, 1, ... (``budget`` of them; None: until the caller stops
        or the wall-clock ``deadline`` passes), in index order; the caller hands each to
        ``planner`` before asking for the next."""
        window = 1 if self.executor.local else self.workers * (1 + AHEAD)
        inflight: deque[tuple[Handle, int]] = deque()
        i = 0
        while True:
            while (len(inflight) < window and (budget is None or i < budget)
                   and planner.ready(i) and not _past(deadline)):
                interrupted()
                handle = self.executor.submit(run_cases, [planner.case(i)], deadline)
                inflight.append((handle, 1))
                i += 1
            if not inflight:
                return
            interrupted()
            handle, n = inflight.popleft()
            outs, spent = self.executor.result(handle)
            self.busy.search.add(spent)
            yield from outs
            if len(outs) < n:
                return  # the deadline: later cases did not run either

    def close(self) -> None:
        """Stop the workers (tasks handed out ahead are dropped)."""
        self.executor.close()
