"""Property testing of protocol models with Hypothesis: the public API.

A property test of your own protocol variant takes a few lines::

    from hypothesis import given, settings
    from elastic_sim.testing import assert_no_violation, load, runs_for, variant

    SC = variant(load("scenarios/scale_down.yaml"), "mine", "my_pkg.proto:host_main")

    @settings(max_examples=50, deadline=None)
    @given(runs_for(SC))
    def test_my_variant_is_safe(run):
        assert_no_violation(SC, run)

Every random choice of a generated run (the fault schedule, the sim seed and, with
``runs_for(..., ties=True)``, the tie seed that orders same-time events) comes from the
Hypothesis draw, so a failure shrinks to a minimal schedule; the assertion message holds the
faults as scenario YAML, ready to paste into a reproducer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from hypothesis import assume
from hypothesis import strategies as st

from elastic_sim.checks import CheckResult, run_checks
from elastic_sim.checks.contracts import judge
from elastic_sim.explore import Signature, known_violations, signatures_of, space_for
from elastic_sim.faults.schedule import DEFAULT_TYPES, FaultSpace
from elastic_sim.faults.strategies import (
    GeneratedRun,
    fault_schedules,
    generated_runs,
    sim_seeds,
    tie_seeds,
)
from elastic_sim.pipeline import record, simulate
from elastic_sim.registry import qualified_name
from elastic_sim.scenario import Scenario, fault_dict, load_scenario, parse_scenario
from elastic_sim.spec import compile_spec

__all__ = [
    "FaultSpace",
    "GeneratedRun",
    "Signature",
    "assert_no_violation",
    "check_run",
    "fault_schedules",
    "generated_runs",
    "load",
    "runs_for",
    "signatures_of",
    "sim_seeds",
    "tie_seeds",
    "unmet_on_seed",
    "variant",
]


def load(path: str | Path) -> Scenario:
    """Load and validate a scenario file."""
    return load_scenario(path)


def variant(sc: Scenario, name: str, entry: str, knobs: type[Any] | None = None,
            **knob_values: Any) -> Scenario:
    """``sc`` run by another protocol entry (``module:function``), labelled ``name``, with
    the knobs dataclass ``knobs`` (default: that of ``sc``'s protocol), plus ``knob_values``.

    The scenario carries its protocol (``protocol.entry`` and ``protocol.knobs_class``):
    nothing is registered anywhere, so worker processes and reproducers find it too."""
    cls = knobs or sc.protocol_info().knobs
    proto: dict[str, Any] = {"name": name, "entry": entry,
                             "knobs": {**sc.protocol.knobs, **knob_values}}
    if cls is not None:
        proto["knobs_class"] = qualified_name(cls)
    raw = sc.model_dump(mode="json", exclude_none=True)
    raw["protocol"] = proto
    return parse_scenario(raw, f"<variant {name}>")  # an entry that does not import fails here


def runs_for(sc: Scenario, *, types: Sequence[str] = DEFAULT_TYPES, max_faults: int = 3,
             max_duration: float = 60.0, spare: Sequence[str] = (),
             horizon: float | None = None, max_crashes: int | None = None,
             ties: bool = False) -> st.SearchStrategy[GeneratedRun]:
    """Generated runs around ``sc``: schedules over its hosts within its fault-free run
    time (or ``horizon``), at most ``max_crashes`` hosts lost for good, sim seeds and (with
    ``ties``) tie seeds."""
    return generated_runs(space_for(sc, types=types, max_faults=max_faults,
                                    max_duration=max_duration, spare=spare, horizon=horizon,
                                    max_crashes=max_crashes), ties)


def check_run(sc: Scenario, run: GeneratedRun, *, within_contract: bool = False
              ) -> list[CheckResult]:
    """Run ``sc`` with the generated faults and seed in the sim; every check's verdict.
    ``within_contract``: a run that breaks an assumption of the protocol's contract (its
    coordinator hit, fewer than its minimum of hosts left) is no example: Hypothesis
    discards it (``hypothesis.assume``)."""
    events = record(compile_spec(sc, seed=run.seed, faults=run.faults,
                                 tie_seed=run.tie_seed), metrics_wanted=False).events
    checks = run_checks(events)
    if within_contract:
        verdict = judge(events, checks)
        assume(verdict is None or not verdict.broken_assumptions)
    return checks


def assert_no_violation(sc: Scenario, run: GeneratedRun,
                        ignore: Sequence[str] | None = None, *,
                        within_contract: bool = False) -> None:
    """Fail with the violations and the schedule (as scenario YAML) if any check fails,
    other than those in ``ignore`` (default: the scenario's ``expect.violated_checks``);
    ``within_contract``: as for :func:`check_run`."""
    found = signatures_of(check_run(sc, run, within_contract=within_contract),
                          known_violations(sc) if ignore is None else ignore)
    if found:
        lines = [f"{sig}: {msg}" for sig, msg in sorted(found.items())]
        faults = yaml.safe_dump([fault_dict(f) for f in run.faults], sort_keys=False)
        raise AssertionError("\n".join(
            [f"{len(lines)} violation(s) with seed {run.seed}, tie_seed {run.tie_seed}:",
             *lines, "faults:", faults]))



def unmet_on_seed(sc: Scenario, seed: int) -> list[str]:
    """What of ``sc``'s claims fails when it runs in the sim with ``seed``: each unmet
    expectation and each violated check it does not declare (empty: all hold)."""
    from elastic_sim.expect import evaluate

    events, metrics, _ = simulate(sc, seed)
    known = set(known_violations(sc))
    return ([f"expectation {e.name}: expected {e.expected}, got {e.actual}"
             for e in evaluate(sc.expect, metrics, events) if not e.ok]
            + [f"check {c.name}" for c in run_checks(events) if not c.ok and c.name not in known])
