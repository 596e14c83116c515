"""Shrinking a violation to the simplest fault schedule that still shows its mechanism.

Greedy: from the case's schedule, take the first candidate one step simpler
(:func:`~elastic_sim.faults.schedule.shrink_candidates`, simplest first) that still shows
the target's mechanism and is smaller, until none does. Candidates are run one at a time,
in list order, so a shrink is a pure function of (scenario, case, target) and never runs
a candidate after the one it takes: no worker count or batch size changes its result or
its number of runs. The violations of one case are shrunk together, one after another,
with one memo of the schedules already run (the mechanisms of one case often shrink
along the same first steps): a schedule is simulated once per case.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from elastic_sim.cases import Case, Outcome, run_case
from elastic_sim.faults.model import Fault
from elastic_sim.faults.schedule import schedule_size, shrink_candidates
from elastic_sim.mechanisms import Signature
from elastic_sim.scenario import Scenario

MAX_SHRINK_RUNS = 400
"""Candidates one shrink may try before it keeps the smallest schedule found so far."""


@dataclass(frozen=True)
class Shrunk:
    """Where one shrink ended: the simplest case found, the signature it shows (the
    target, or it with faults that did not matter dropped), and the runs it simulated
    (candidates already run for an earlier mechanism of the same case not counted)."""

    case: Case
    signature: Signature
    runs: int
    cut: bool = False
    """The search's time ran out before the shrink did: the simplest schedule so far."""


class Memo:
    """Outcomes of the schedules one case has run so far, by schedule (the case's sim seed,
    tie seed and variation are the same for every candidate)."""

    def __init__(self, run: Callable[[Case], Outcome]) -> None:
        self._run = run
        self._seen: dict[tuple[Fault, ...], Outcome] = {}
        self.runs = 0
        """Schedules actually simulated."""

    def outcome(self, case: Case) -> Outcome:
        """The outcome of ``case``, simulated unless this schedule ran before."""
        out = self._seen.get(case.faults)
        if out is None:
            out = self._seen[case.faults] = self._run(case)
            self.runs += 1
        return out


def shrink(memo: Memo, case: Case, target: Signature,
           max_runs: int = MAX_SHRINK_RUNS, pinned: Mapping[str, Fault] | None = None,
           deadline: float | None = None) -> Shrunk:
    """The simplest schedule found from ``case`` that still shows ``target``'s mechanism
    (:meth:`~elastic_sim.mechanisms.Signature.admits`, re-checked on every step); at most
    ``max_runs`` candidates tried, none after the wall-clock ``deadline``
    (:func:`time.time`; the search's ``--time``). ``pinned``: the scenario's own faults
    by id (a search around them: kept, and only put back as written)."""
    best, tried, before = case, 0, memo.runs
    improved = True
    cut = False
    while improved and tried < max_runs:
        improved, size = False, schedule_size(best.faults, pinned)
        for faults in shrink_candidates(best.faults, pinned):
            if schedule_size(faults, pinned) >= size:
                continue  # not simpler: it could never be taken
            if tried >= max_runs:
                break
            if deadline is not None and time.time() >= deadline:
                cut = True
                break
            tried += 1
            cand = dataclasses.replace(case, faults=faults)
            shown = next((s for s in memo.outcome(cand).signatures if target.admits(s)), None)
            if shown is not None:
                best, target, improved = cand, shown, True
                break
    return Shrunk(best, target, memo.runs - before, cut)


def shrink_case(sc: Scenario, ignore: Collection[str], case: Case,
                targets: Sequence[Signature], pinned: Mapping[str, Fault] | None = None,
                deadline: float | None = None) -> list[Shrunk]:
    """Each of ``targets`` (violations ``case`` showed) shrunk, in order, sharing one memo.
    A candidate runs only the targets' checks: a step is taken on the target's check alone
    (:meth:`~elastic_sim.mechanisms.Signature.admits`), so the others' verdicts change
    nothing."""
    only = sorted({t.check for t in targets})
    memo = Memo(lambda c: run_case(sc, c, ignore, only))
    return [shrink(memo, case, t, pinned=pinned, deadline=deadline) for t in targets]
