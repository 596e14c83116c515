"""One case of a search: its fault schedule and seeds (drawn from the search's seed and its
index), its sim run (exactly its reproducer's run, without rebuilding the scenario per
case) and what the checks said about it, told apart by mechanism
(:class:`~elastic_sim.mechanisms.Signature`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from elastic_sim.checks import run_checks
from elastic_sim.checks.contracts import judge
from elastic_sim.coverage import reach
from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import Fault
from elastic_sim.faults.record import INJECTOR
from elastic_sim.faults.triggers import EventTrigger
from elastic_sim.history import History
from elastic_sim.mechanisms import Signature, signatures_of
from elastic_sim.pipeline import record
from elastic_sim.scenario import Scenario
from elastic_sim.spec import RunSpec, compile_spec
from elastic_sim.trace import STRETCH, TraceEvent
from elastic_sim.variation import Variation, apply_variation
from elastic_sim.world import RunResult


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
    standing: dict[Signature, str] = field(default_factory=dict)
    """Each mechanism against the protocol's contract: broken_promise, weak_spot or
    outside_contract (none: the protocol has no contract)."""
    reached: frozenset[str] = frozenset()
    """What the run covered (:func:`elastic_sim.coverage.reach`)."""
    triggers: tuple[EventTrigger, ...] = ()
    """Protocol events of the run a later case may fire a fault at."""


def run_case(sc: Scenario, case: Case, ignore: Collection[str] = (),
             only: Collection[str] | None = None, observe: bool = False) -> Outcome:
    """Run one case in the sim (in memory) and check it (a variation the scenario rejects,
    such as min above max, is no case: nothing to report); ``only``: just the checks so
    named (a shrink looks for one check's violations); ``observe``: also what the run
    covered and the events a later case may fire a fault at. The run is the one its
    reproducer makes (:func:`~elastic_sim.scenario.with_faults`), without compiling the
    scenario again for every case (:class:`_Specs`)."""
    try:
        events, result = case_run(sc, case)
    except ScenarioError:
        return Outcome(case, [], {}, False)
    checks = run_checks(events, only)
    sigs = signatures_of(checks, ignore, events)
    standing: dict[Signature, str] = {}
    if sigs:
        verdict = judge(events, checks)
        if verdict is not None:
            standing = {s: verdict.standing.get(s.check, "broken_promise") for s in sigs}
    out = Outcome(case, sorted(sigs), sigs, result.hung, standing)
    if observe:
        out.reached = reach(events.raw, sc.protocol.name) | {f"m:{s}" for s in sigs}
        out.triggers = event_triggers(events.raw, float("inf"), TRIGGERS_PER_RUN)
    return out


RUNNER = "elastic-sim"
"""The ``proc`` of the runner's own events (run start and end)."""
TRIGGERS_PER_RUN = 24
"""Most events of one run that later cases may fire faults at."""


def event_triggers(events: Sequence[TraceEvent], horizon: float,
                   limit: int = 48) -> tuple[EventTrigger, ...]:
    """Triggers at the protocol events of a run up to ``horizon``: each (kind, host,
    round/step/epoch) once, at most ``limit`` spread over the run."""
    seen: dict[EventTrigger, None] = {}
    for e in events:
        if e.t > horizon or e.host == "*" or e.proc in (RUNNER, INJECTOR) \
                or e.kind in UNTRIGGERED:
            continue
        key = next(((k, e.data[k]) for k in ("round", "step", "epoch")
                    if isinstance(e.data.get(k), int) and not isinstance(e.data[k], bool)),
                   None)
        seen.setdefault(EventTrigger(e.kind, e.host, (key,) if key else ()), None)
    found = list(seen)
    if len(found) > limit:
        found = [found[i * len(found) // limit] for i in range(limit)]
    return tuple(found)


UNTRIGGERED = frozenset({STRETCH})
"""Kinds no fault fires at: a fast-fidelity summary stands for events a watcher sees."""


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
