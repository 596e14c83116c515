"""Property tests of the protocol models with the public testing API (bounded examples so
CI stays fast), and proof that Hypothesis shrinks a generated schedule."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, given, settings

from elastic_sim.checks.contracts import contract_for
from elastic_sim.testing import (
    GeneratedRun,
    assert_no_violation,
    check_run,
    load,
    runs_for,
    signatures_of,
    variant,
)

SCENARIOS = Path(__file__).resolve().parent.parent.parent / "scenarios"
STATIC = load(SCENARIOS / "scale_down.yaml")
CI = settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])




def weak_spots(protocol: str) -> list[str]:
    """The checks a protocol's contract declares as its known weak spots."""
    contract = contract_for(protocol)
    assert contract is not None
    return sorted(contract.weak_spots)


# The static protocol's contract: its coordinator (the store host) survives and at least
# min_hosts (2 of 4) hosts survive; its one weak spot is that a host dying after joining a
# round stays in it until group creation fails. Crashing the coordinator breaks an
# assumption (the console says "outside the contract"), so the store host is spared; so
# does any other fault that hits it (a hang of it, a cut around it): such a run is no
# example. (One was: h0 hung for 1 s across the last call; at the heal it closed the
# round with the hosts whose names were written, and h1, released by the same heal, was
# writing its name: healthy_hosts_kept said h1 was left out.)
CONTRACT = weak_spots("static")


@CI
@given(runs_for(STATIC, max_crashes=2, spare=(STATIC.store_host,)))
def test_static_protocol_is_safe_under_crashes_hangs_and_partitions(run: GeneratedRun) -> None:
    assert_no_violation(STATIC, run, ignore=CONTRACT, within_contract=True)


def test_a_run_outside_the_contract_is_no_example() -> None:
    """The schedule that hung the coordinator across its last call (see above) is
    discarded, not judged; the same hang of another host is judged."""
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable

    from elastic_sim.faults.model import CrashHost, HangHost

    crash = CrashHost(id="x1-crash", at=0.003, host="h2")
    judged: list[GeneratedRun] = []

    def within(host: str) -> None:
        run = GeneratedRun((crash, HangHost(id="x0-hang", at=0.046, host=host,
                                            duration=1.0)), 0, None)

        @settings(max_examples=1, database=None, deadline=None)
        @given(st.just(run))
        def example(r: GeneratedRun) -> None:
            check_run(STATIC, r, within_contract=True)
            judged.append(r)

        example()

    with pytest.raises(Unsatisfiable):
        within("h0")
    assert judged == []
    hang_h0 = GeneratedRun((crash, HangHost(id="x0-hang", at=0.046, host="h0",
                                            duration=1.0)), 0, None)
    assert "healthy_hosts_kept" in {c.name for c in check_run(STATIC, hang_h0) if not c.ok}
    within("h1")
    assert len(judged) == 1


@pytest.mark.slow
def test_hypothesis_shrinks_a_failing_schedule_of_a_broken_variant_to_one_fault() -> None:
    broken = variant(STATIC, "static-no-rollback", "tests.explore.variants:no_rollback_main")

    def violates(run: GeneratedRun) -> bool:  # the variant's own bug, not another finding
        return "committed_progress" in {s.check for s in signatures_of(check_run(broken, run))}

    smallest = find(runs_for(broken, types=("crash", "hang")), violates,
                    settings=settings(max_examples=300, database=None, deadline=None,
                                      derandomize=True))
    assert len(smallest.faults) == 1
    assert {s.check for s in signatures_of(check_run(broken, smallest))} == {
        "committed_progress"}


def test_the_assertion_names_the_violation_and_gives_the_schedule_as_yaml() -> None:
    broken = variant(STATIC, "static-no-rollback", "tests.explore.variants:no_rollback_main")
    from elastic_sim.faults.model import CrashHost

    run = GeneratedRun((CrashHost("c", 2.55, "h3"),), 0)
    try:
        assert_no_violation(broken, run)
    except AssertionError as exc:
        text = str(exc)
    else:
        raise AssertionError("the broken variant passed")
    assert "committed_progress@" in text and "type: crash" in text and "host: h3" in text


TORCHELASTIC = load(SCENARIOS / "torchelastic" / "scale_down.yaml")
# Upstream torch 2.13 behaviour that explore found and kept in scenarios/found/te_*: a
# participant that died during the rendezvous stays in the round until its heartbeat
# expires, and a handler's cached bootstrap info hands out a dead rank 0's master address.
TORCHELASTIC_UPSTREAM = weak_spots("torchelastic")


@settings(CI, max_examples=15)
@given(runs_for(TORCHELASTIC))
def test_torchelastic_model_breaks_no_check_beyond_upstreams_known_ones(
    run: GeneratedRun,
) -> None:
    assert_no_violation(TORCHELASTIC, run, ignore=TORCHELASTIC_UPSTREAM)


HOROVOD = load(SCENARIOS / "horovod" / "fault_tolerance_without_scaling.yaml")
# horovodrun's driver runs on the launching host (localhost here): it is spared. Liveness is
# not asserted: the search found runs that never end (a listed host down from the start,
# the driver's host lost), kept in scenarios/found/horovod_*-terminates.yaml; whether
# upstream hangs there too is for the Horovod model to settle.
HOROVOD_OPEN = weak_spots("horovod")


@pytest.mark.slow
@settings(CI, max_examples=8)
@given(runs_for(HOROVOD, spare=["localhost"]))
def test_horovod_model_is_safe_when_the_driver_host_survives(run: GeneratedRun) -> None:
    assert_no_violation(HOROVOD, run, ignore=HOROVOD_OPEN)
