"""The real-torchrun comparison reads what it must: the torchrun setup from elastic-sim's
scenario YAML (same hosts, knobs, fault), and the worlds, in order, from worker logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.torchrun_compare import ROOT, SCENARIOS, setup_from_yaml, worlds_of


def _step(t: float, pid: int, world: int, rank: int, size: int, nodes: int,
          step: int) -> dict[str, Any]:
    return {"kind": "step", "t": t, "pid": pid, "agent_pid": 1, "world": world, "rank": rank,
            "world_size": size, "group_rank": rank, "group_world_size": nodes,
            "local_rank": 0, "restart": 0 if world == 10 else 1, "step": step}


def test_worlds_are_ordered_by_first_step_with_their_members() -> None:
    lines = [
        _step(5.0, 21, 21, 0, 2, 2, 1), _step(5.01, 22, 21, 1, 2, 2, 1),
        _step(1.0, 10, 10, 0, 3, 3, 1), _step(1.0, 11, 10, 1, 3, 3, 1),
        _step(1.0, 12, 10, 2, 3, 3, 1), _step(1.1, 10, 10, 0, 3, 3, 2),
        {"kind": "start", "t": 0.5, "pid": 10, "world": 10},
    ]
    worlds = worlds_of(lines)
    assert [w.id for w in worlds] == [10, 21]
    assert [w.nodes for w in worlds] == [3, 2]
    assert worlds[0].ranks == [[0, 0, 0], [1, 0, 1], [2, 0, 2]]
    assert worlds[0].steps == 2 and worlds[1].first_step == 5.0


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_setup_follows_the_scenario_yaml(name: str) -> None:
    path = SCENARIOS[name]
    if not (ROOT / path).exists():
        pytest.skip(f"{path} not written yet")
    import yaml

    doc = yaml.safe_load(Path(ROOT / path).read_text())
    knobs = doc["protocol"]["knobs"]
    setup = setup_from_yaml(name, path)
    assert setup.agents == doc["cluster"]["hosts"]
    assert (setup.min_nodes, setup.max_nodes) == (knobs["min_nodes"], knobs["max_nodes"])
    assert setup.fault == name
    assert setup.target_agent != 0, "the store host (agent 0) must not be the one hit"
    conf = setup.rdzv_conf_arg(setup.target_agent)
    assert conf.startswith("is_host=0,")
    assert f"last_call_timeout={knobs['last_call_timeout']}" in conf
    assert f"keep_alive_max_attempt={knobs['keep_alive_max_attempt']}" in conf
    assert setup_from_yaml(name, path).rdzv_conf_arg(0).startswith("is_host=1,")
