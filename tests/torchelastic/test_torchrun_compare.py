"""The real-torchrun comparison reads what it must: the torchrun setup from elastic-sim's
scenario YAML (same hosts, knobs, fault), and the worlds, in order, from worker logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.torchrun_compare import SCENARIOS
from benchmarks.torchrun_trial import ROOT, setup_from_yaml, worlds_of


def _line(kind: str, t: float, pid: int, rnd: int, rank: int, size: int,
          step: int = 0) -> dict[str, Any]:
    return {"kind": kind, "t": t, "pid": pid, "agent_pid": 1, "round": rnd, "rank": rank,
            "world_size": size, "group_rank": rank, "group_world_size": size,
            "local_rank": 0, "restart": rnd, "step": step}


def test_worlds_are_rounds_in_start_order_with_members_and_progress() -> None:
    lines = [
        _line("spawn", 4.0, 21, 1, 0, 2), _line("spawn", 4.1, 22, 1, 1, 2),
        _line("step", 5.0, 21, 1, 0, 2, 1), _line("step", 5.01, 22, 1, 1, 2, 1),
        _line("spawn", 0.1, 10, 0, 0, 3), _line("spawn", 0.2, 11, 0, 1, 3),
        _line("spawn", 0.2, 12, 0, 2, 3),
        _line("step", 1.0, 10, 0, 0, 3, 1), _line("step", 1.0, 11, 0, 1, 3, 1),
        _line("step", 1.0, 12, 0, 2, 3, 1), _line("step", 1.1, 10, 0, 0, 3, 2),
        _line("spawn", 9.0, 31, 2, 0, 2),  # a world that never trained
    ]
    worlds = worlds_of(lines)
    assert [w.id for w in worlds] == [0, 1, 2]
    assert [w.nodes for w in worlds] == [3, 2, 2]
    assert worlds[0].ranks == [[0, 0, 0], [1, 0, 1], [2, 0, 2]]
    assert worlds[0].steps == 2 and worlds[0].spawned == 0.1
    assert worlds[1].first_step == 5.0
    assert worlds[2].first_step is None and worlds[2].steps == 0


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
