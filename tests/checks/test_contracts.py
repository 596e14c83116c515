"""Per-protocol contracts: a violation reads as the protocol breaking its own promise,
upstream's known weak spot, or outside the contract (the faults broke one of its
assumptions); the static protocol keeps every promise within its contract."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from elastic_sim.checks import CHECKS, run_checks
from elastic_sim.checks.contracts import ContractVerdict, contract_for, judge
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
STATIC_HEALTHY = sorted(p.name for p in ROOT.glob("*.yaml") if not p.name.startswith("broken_"))


@cache
def verdict(rel: str) -> ContractVerdict:
    sc = load_scenario(ROOT / rel)
    events, _, _ = simulate(sc, sc.seed)
    v = judge(events, run_checks(events))
    assert v is not None
    return v


def test_every_protocol_declares_a_contract_over_known_checks() -> None:
    names = {c.__name__ for c in CHECKS}
    for protocol in ("static", "torchelastic", "horovod"):
        contract = contract_for(protocol)
        assert contract is not None and contract.assumptions
        assert set(contract.weak_spots) <= names
        assert all(why for why in contract.weak_spots.values())


@pytest.mark.parametrize("name", STATIC_HEALTHY)
def test_the_static_protocol_keeps_its_promises_within_its_contract(name: str) -> None:
    v = verdict(name)
    assert v.names("broken_promise") == []
    assert "kept" in v.standing.values()


def test_a_store_host_crash_is_outside_the_static_contract() -> None:
    v = verdict("store_host_crash.yaml")
    assert "coordinator_survives" in v.broken_assumptions
    assert "hits the coordinator h0" in v.broken_assumptions["coordinator_survives"]


def test_a_reset_of_the_stores_connections_is_outside_the_static_contract() -> None:
    """Its store clients never reconnect (as TCPStore's): the job fails with every host up,
    which avoidable_job_failure reports and the contract's assumption explains."""
    v = verdict("store_connections_reset.yaml")
    assert v.broken_assumptions == {
        "store_connections_hold": "reset-all resets the connections of the store's host h0"}
    assert v.names("outside_contract") == ["avoidable_job_failure"]
    assert v.names("broken_promise") == []


def test_a_bridged_partition_is_outside_the_static_contract() -> None:
    """Rounds picked by arrival hold a cut pair while h1 bridges the two sides: the job
    makes no progress for 719 s, which progress_after_faults reports and the contract's
    assumption explains."""
    v = verdict("bridged_partition_outlasts_the_bound.yaml")
    assert v.broken_assumptions == {
        "no_partial_partitions":
            "bridge-h1 (bridge) leaves hosts that reach a third unable to reach each other"}
    assert v.names("outside_contract") == ["progress_after_faults"]


def test_a_deliberately_broken_static_variant_breaks_its_promise() -> None:
    v = verdict("broken_rejoin_at_commit.yaml")
    assert v.names("broken_promise") == ["no_pointless_reconfiguration"]


def test_upstream_weak_spots_are_told_apart_from_broken_promises() -> None:
    v = verdict("torchelastic/scale_up.yaml")
    assert v.names("weak_spot") == ["rendezvous_closed_by_job_end", "avoidable_job_failure"]
    assert v.names("broken_promise") == [] and not v.broken_assumptions


def test_a_store_dying_while_its_host_lives_is_outside_the_torchft_contract() -> None:
    """g0's store dies while g0's rank lives: every reconfiguration fails on it (the
    quorum's primary's store). The fault breaks the contract's assumption (upstream's
    store lives inside torchrun's agent); the wedge itself is upstream's ft_liveness weak
    spot, which an agent killed while its rank lives reaches within the contract."""
    v = verdict("torchft/primary_store_crash.yaml")
    assert v.broken_assumptions == {
        "stores_live_with_their_hosts":
            "store-g0 ends the store server on g0 while its host lives"}
    assert v.names("weak_spot") == ["ft_liveness"]
    assert v.names("broken_promise") == []
    agent = verdict("torchft/agent_killed_leaves_quorum_on_dead_store.yaml")
    assert not agent.broken_assumptions
    assert agent.names("weak_spot") == ["terminates", "ft_liveness"]


@pytest.mark.parametrize("name", ["group_starts_over_after_job_done.yaml",
                                  "data_runs_out_after_failed_steps.yaml",
                                  "collective_fault_before_first_start.yaml"])
def test_campaign_reproducers_that_read_as_broken_torchft_promises_keep_them(name: str
                                                                           ) -> None:
    """Each was a broken promise of committed_progress, ft_liveness or ft_group_recovers
    in a campaign of scenarios/campaign/ft_4_replicas.yaml: a check's false positive, fixed
    (the scenario's description says which)."""
    v = verdict(f"torchft/{name}")
    assert not v.broken_assumptions
    assert v.names("broken_promise") == []
    assert v.names("weak_spot") == ["ft_data_position_agreement"]
