"""One case of a search: its fault schedule and seeds (drawn from the search's seed and its
index), its sim run (exactly its reproducer's run, without rebuilding the scenario per
case) and what the checks said about it, told apart by violation :class:`Signature`."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from elastic_sim.checks import CheckResult, run_checks
from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import Fault
from elastic_sim.faults.schedule import FaultSpace, random_schedule
from elastic_sim.history import History
from elastic_sim.pipeline import record
from elastic_sim.scenario import Scenario
from elastic_sim.spec import RunSpec, compile_spec
from elastic_sim.trace import TraceEvent
from elastic_sim.variation import Variation, Vary, apply_variation, draw_variation, shaped
from elastic_sim.world import RunResult


@dataclass(frozen=True, order=True)
class Signature:
    """What tells two violations apart, its mechanism: the check, the kinds of its witness
    events, and the fault types that had fired by its last witness event (so one
    frequent mechanism does not hide another that breaks the same check, and a shrink
    step that swaps the fault behind it is not taken)."""

    check: str
    where: str
    faults: str = ""

    def __str__(self) -> str:
        return f"{self.check}@{self.where}" + (f"[{self.faults}]" if self.faults else "")

    def admits(self, other: Signature) -> bool:
        """Whether ``other`` is this mechanism with fewer faults behind it: the same check
        on the same kinds of witness events, behind some of the same fault types (a shrink
        step may drop a fault that did not matter, never swap in another)."""
        mine = set(self.faults.split(",")) - {""}
        theirs = set(other.faults.split(",")) - {""}
        return ((self.check, self.where) == (other.check, other.where)
                and theirs <= mine and (bool(theirs) or not mine))


@dataclass(frozen=True)
class Case:
    """One generated run: a fault schedule, a sim seed and a tie seed (None: FIFO ties)."""

    index: int
    faults: tuple[Fault, ...]
    seed: int
    tie_seed: int | None = None
    variation: Variation = ()
    """Knob and cluster values drawn for it (:mod:`elastic_sim.variation`)."""


@dataclass
class Outcome:
    """What the checks said about one case."""

    case: Case
    signatures: list[Signature]
    messages: dict[Signature, str]
    hung: bool


def signatures_of(checks: Sequence[CheckResult], ignore: Collection[str] = (),
                  events: Sequence[TraceEvent] = ()) -> dict[Signature, str]:
    """Every distinct violation signature of one run, with its first message (checks named
    in ``ignore`` left out); ``events``, the run's trace, name the faults behind each."""
    faults = events.of("fault") if isinstance(events, History) else \
        [e for e in events if e.kind == "fault"]  # (a History need not expand its summaries)
    fired = [(e.t, str(e.data.get("type"))) for e in faults if e.data.get("phase") == "start"]
    out: dict[Signature, str] = {}
    for c in checks:
        if c.name in ignore:
            continue
        for v in c.violations:
            last = max((ev.t for ev in v.witness), default=float("inf"))
            behind = ",".join(sorted({kind for t, kind in fired if t <= last}))
            sig = Signature(c.name, ",".join(ev.kind for ev in v.witness), behind)
            out.setdefault(sig, v.message)
    return out


def run_case(sc: Scenario, case: Case, ignore: Collection[str] = (),
             only: Collection[str] | None = None) -> Outcome:
    """Run one case in the sim (in memory) and check it (a variation the scenario rejects,
    such as min above max, is no case: nothing to report); ``only``: just the checks so
    named (a shrink looks for one check's violations). The run is the one its
    reproducer makes (:func:`~elastic_sim.scenario.with_faults`), without compiling the
    scenario again for every case (:class:`_Specs`)."""
    try:
        events, result = case_run(sc, case)
    except ScenarioError:
        return Outcome(case, [], {}, False)
    sigs = signatures_of(run_checks(events, only), ignore, events)
    return Outcome(case, sorted(sigs), sigs, result.hung)


def case_run(sc: Scenario, case: Case) -> tuple[History, RunResult]:
    """The events and result of one case's sim run: those of its reproducer's run
    (ScenarioError: the scenario rejects the case's variation)."""
    spec = _SPECS.get(sc, case.variation).for_case(case.faults, case.seed, case.tie_seed)
    rec = record(spec, metrics_wanted=False)
    return rec.events, rec.result


class _Specs:
    """The varied scenario compiled for the sim (seeds and faults aside: a case sets its
    own), once for the last few (scenario, variation) pairs seen: a search's cases share
    them. Keyed by the scenario object, held here so that its identity is not reused."""

    SIZE = 8

    def __init__(self) -> None:
        self._built: dict[tuple[int, Variation], tuple[Scenario, RunSpec]] = {}

    def get(self, sc: Scenario, variation: Variation) -> RunSpec:
        """``sc`` with ``variation`` applied, compiled (ScenarioError: rejected)."""
        key = (id(sc), variation)
        hit = self._built.pop(key, None)
        if hit is None:
            hit = (sc, compile_spec(apply_variation(sc, variation), faults=()))
        self._built[key] = hit  # the most recent last
        while len(self._built) > self.SIZE:
            del self._built[next(iter(self._built))]
        return hit[1]


_SPECS = _Specs()


def make_case(seed: int, index: int, space: FaultSpace, ties: bool = False,
              varies: Sequence[Vary] = ()) -> Case:
    """Case ``index`` of the search with seed ``seed`` (with ``ties``: a tie seed too;
    with ``varies``: knob and cluster values too)."""
    variation = draw_variation(f"{seed}/vary/{index}", varies) if varies else ()
    faults = random_schedule(f"{seed}/schedule/{index}", shaped(space, variation))
    sim_seed = random.Random(f"{seed}/sim/{index}").randrange(2**32)
    tie_seed = random.Random(f"{seed}/ties/{index}").randrange(2**32) if ties else None
    return Case(index, faults, sim_seed, tie_seed, variation)
