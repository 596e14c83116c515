"""Every fault type is drawable: a search over the whole space meets each type, each drawn
fault is valid scenario data (it reads back as itself), and faults also fire at the
protocol's own events."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.explore import event_triggers, protocol_fault_types, space_for
from elastic_sim.faults.model import FAULT_TYPES
from elastic_sim.faults.schedule import FaultSpace, random_schedule
from elastic_sim.faults.triggers import Triggered, unwrap
from elastic_sim.scenario import Scenario, load_scenario, with_faults
from elastic_sim.trace import TraceEvent

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
ON_GPUS = tuple(t for t, c in FAULT_TYPES.items() if c.device == "cuda")
"""Fault types that need ``cluster.device: cuda``."""


def on_gpus(sc: Scenario) -> Scenario:
    """``sc`` on ``cluster.device: cuda``."""
    return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"device": "cuda"})})


def test_every_fault_type_is_drawn_and_reads_back_as_scenario_data() -> None:
    horovod = load_scenario(SCENARIOS / "horovod" / "hosts_added_and_removed.yaml")
    # it has a discovery source, and runs on CPUs
    assert set(protocol_fault_types(horovod)) == set(FAULT_TYPES) - set(ON_GPUS)
    sc = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")  # 3 hosts: a bridge fits
    sc = on_gpus(sc)  # GPU faults fit too
    types = tuple(FAULT_TYPES)
    space = FaultSpace(hosts=tuple(h.name for h in sc.cluster.host_specs()), horizon=20.0,
                       types=types, max_faults=3, max_duration=10.0)
    drawn: set[str] = set()
    for i in range(400):
        schedule = random_schedule(f"all/{i}", space)
        for f in schedule:
            drawn.add(f.type)
        again = with_faults(sc, list(schedule), seed=0, name="again").fault_objects()
        assert again == list(schedule)
    assert drawn == set(FAULT_TYPES)


def test_a_protocol_without_a_discovery_source_is_not_searched_with_discovery_faults() -> None:
    sc = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")
    types = protocol_fault_types(sc)
    assert "signal" in types and "power_off" in types
    assert not [t for t in types if t.startswith("discovery")]


def test_a_cluster_on_cpus_is_not_searched_with_gpu_faults() -> None:
    sc = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")
    assert ON_GPUS and not set(ON_GPUS) & set(protocol_fault_types(sc))
    assert set(ON_GPUS) <= set(protocol_fault_types(on_gpus(sc)))


def test_a_search_for_gpu_faults_on_cpus_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = SCENARIOS / "torchelastic" / "scale_down.yaml"
    rc = main(["explore", str(path), "--faults", f"crash,{ON_GPUS[0]}", "--budget", "1",
               "--out", str(tmp_path / "found")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"--faults: a {ON_GPUS[0]} fault needs cluster.device: cuda" in err
    assert not (tmp_path / "found").exists()


def test_triggers_come_from_the_protocol_events_of_a_fault_free_run() -> None:
    events = [TraceEvent(0.0, "*", "elastic-sim", "run_start", {}),
              TraceEvent(1.0, "h0", "h0/main", "rdzv_done", {"round": 0, "world_size": 2}),
              TraceEvent(1.5, "h1", "h1/w0", "step", {"step": 1}),
              TraceEvent(1.6, "h1", "h1/w0", "step", {"step": 1}),
              TraceEvent(9.0, "h1", "h1/w0", "step", {"step": 9})]
    got = [t.describe() for t in event_triggers(events, horizon=5.0)]
    assert got == ["rdzv_done{round=0}@h0", "step{step=1}@h1"]


def test_a_search_space_with_triggers_draws_triggered_faults_that_replay() -> None:
    sc = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")
    space = space_for(sc, types=("crash", "signal", "power_off"), triggers=True)
    assert space.triggers
    schedules = [random_schedule(f"t/{i}", space) for i in range(50)]
    triggered = [f for s in schedules for f in s if isinstance(f, Triggered)]
    assert triggered and all(unwrap(f).type in space.types for f in triggered)
    for s in schedules[:10]:
        assert with_faults(sc, list(s), seed=0, name="again").fault_objects() == list(s)
