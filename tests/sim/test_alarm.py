"""A timeout's timer in the sim (``SimRuntime.after``: one kernel callback,
elastic_sim.sim.tasks.Alarm) does exactly what the runtime-neutral timer does (``Runtime.after``: a
task that sleeps, then calls): the same trace, byte for byte, on runs whose timeouts meet
stragglers, stopped and wedged processes, signals, crashes and partitions, in the protocols that
wait with timeouts (torchelastic's keep-alive timer and agent, Horovod's driver)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.pipeline import simulate
from elastic_sim.protocols.api import Runtime
from elastic_sim.scenario import Scenario, load_scenario, parse_scenario
from elastic_sim.sim.runtime import SimRuntime
from elastic_sim.trace import encode

ROOT = Path(__file__).resolve().parents[2]


def _digest(sc: Scenario) -> str:
    hist, _, _ = simulate(sc, sc.seed)
    return hashlib.sha256("".join(encode(e) for e in hist.raw).encode()).hexdigest()


def _with_faults(path: str, faults: list[dict[str, Any]]) -> Scenario:
    raw = copy.deepcopy(yaml.safe_load((ROOT / path).read_text()))
    raw["faults"] = faults
    raw.pop("expect", None)
    return parse_scenario(raw, f"<{path} with {faults}>")


TE = "scenarios/torchelastic/scale_down.yaml"
CASES = [
    (TE, [{"id": "f", "type": "hang", "host": "h1", "at": 4.0, "duration": 2.5}]),
    (TE, [{"id": "f", "type": "hang", "host": "h0", "at": 9.05, "duration": 40.0}]),
    (TE, [{"id": "f", "type": "straggler", "host": "h1", "factor": 3.0, "at": 2.0,
           "duration": 6.0}]),
    (TE, [{"id": "f", "type": "wedge", "host": "h1", "activity": "keep-alive", "at": 3.0,
           "duration": 4.0}]),
    (TE, [{"id": "f", "type": "signal", "host": "h1", "signal": "TERM", "at": 5.0}]),
    (TE, [{"id": "f", "type": "partition", "groups": [["h0", "h1"], ["h2"]], "at": 9.05,
           "duration": 3.0}]),
    (TE, [{"id": "f", "type": "crash", "host": "h0", "at": 9.05}]),
    ("scenarios/horovod/single_rank_failure.yaml", None),
    ("scenarios/horovod/hosts_added_and_removed.yaml", None),
    ("scenarios/torchelastic/store_host_crash.yaml", None),
]


@pytest.mark.parametrize("path,faults", CASES, ids=lambda c: str(c))
def test_the_sims_timer_traces_as_a_sleeping_task_would(
        path: str, faults: list[dict[str, Any]] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = load_scenario(ROOT / path) if faults is None else _with_faults(path, faults)
    alarm = _digest(sc)
    monkeypatch.setattr(SimRuntime, "after", Runtime.after)
    assert _digest(sc) == alarm


def test_a_run_with_a_tie_seed_keeps_the_timer_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tie seed explores same-time orders, the timer task's own lane among them, as the
    step-by-step run has it: such a run's timers stay tasks (its trace is the one saved
    reproducers with tie seeds were found with)."""
    import elastic_sim.sim.runtime as simrt

    made: list[float] = []
    real = simrt.Alarm

    def counted(*args: Any) -> Any:
        made.append(args[2])
        return real(*args)

    monkeypatch.setattr(simrt, "Alarm", counted)
    sc = load_scenario(ROOT / TE).model_copy(update={"tie_seed": 5})
    _, metrics, _ = simulate(sc, sc.seed)
    assert metrics.outcome == "completed" and made == []
    simulate(sc.model_copy(update={"tie_seed": None}), sc.seed)
    assert made  # without one, the kernel's timers
