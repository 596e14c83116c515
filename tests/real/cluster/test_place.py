"""A node learns its place from its launcher's environment."""

from __future__ import annotations

import pytest

from elastic_sim.real.cluster.place import PlacementError, placement, share


def test_slurm_tasks_are_nodes() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "ES_COORDINATOR": "head:29400"}
    p = placement(env)
    assert (p.index, p.count, p.coordinator, p.source) == (2, 4, ("head", 29400), "slurm")


def test_a_kubernetes_indexed_job_pod_is_a_node() -> None:
    env = {"JOB_COMPLETION_INDEX": "1", "ES_NODES": "3", "ES_COORDINATOR": "es-run-0.es-run:29400"}
    p = placement(env)
    assert (p.index, p.count, p.coordinator[0], p.source) == (1, 3, "es-run-0.es-run", "k8s")


def test_the_plain_contract_is_rank_and_world_size() -> None:
    p = placement({"RANK": "0", "WORLD_SIZE": "2"}, coordinator="[::1]:5000")
    assert (p.index, p.count, p.coordinator, p.source) == (0, 2, ("::1", 5000), "env")


def test_the_command_line_wins() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "ES_COORDINATOR": "head:1"}
    assert placement(env, index=0, count=1).index == 0


@pytest.mark.parametrize(("env", "match"), [
    ({}, "cannot tell this node's index"),
    ({"RANK": "x", "WORLD_SIZE": "2", "ES_COORDINATOR": "h:1"}, "whole number"),
    ({"RANK": "2", "WORLD_SIZE": "2", "ES_COORDINATOR": "h:1"}, "not within 0..1"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "no coordinator address"),
    ({"RANK": "0", "WORLD_SIZE": "2", "ES_COORDINATOR": "h"}, "expected host:port"),
    ({"JOB_COMPLETION_INDEX": "0", "ES_COORDINATOR": "h:1"}, "ES_NODES"),
])
def test_an_environment_that_does_not_say_is_refused(env: dict[str, str], match: str) -> None:
    with pytest.raises(PlacementError, match=match):
        placement(env)


def test_hosts_are_shared_round_robin_in_scenario_order() -> None:
    hosts = ("h0", "h1", "h2", "h3", "h4")
    assert [share(hosts, 2, i) for i in range(2)] == [("h0", "h2", "h4"), ("h1", "h3")]
    assert [share(hosts, 5, i) for i in range(5)] == [(h,) for h in hosts]
