"""Running Horovod scenarios in the sim from tests: load with knob overrides, simulate in
memory, pick trace events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from elastic_sim.checks import CheckResult, run_checks
from elastic_sim.expect import ExpectationResult, evaluate
from elastic_sim.pipeline import simulate
from elastic_sim.reports.metrics import Metrics
from elastic_sim.scenario import Scenario, parse_scenario
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios" / "horovod"


def small_job(name: str, hosts: Sequence[str], offered: Sequence[str],
              faults: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A 3-epoch Horovod job of 2 to 4 slots (np 2) on ``hosts`` (the first runs
    horovodrun), discovery offering ``offered`` (``host:slots``), with ``faults``."""
    return {
        "name": name, "seed": 0, "time_limit": 900,
        "protocol": {"name": "horovod", "knobs": {
            "np": 2, "min_np": 2, "discovery_period": 0.01, "batches_per_epoch": 10,
            "batches_per_commit": 1, "epochs": 3, "discovery": {"hosts": list(offered)}}},
        "cluster": {"hosts": list(hosts), "store_host": hosts[0]},
        "workload": {"steps": 30, "step_time": 0.1, "commit_every": 1, "state_bytes": 4096},
        "faults": list(faults),
    }


def raw(name: str) -> dict[str, Any]:
    """A shipped scenario as plain data."""
    out: dict[str, Any] = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    return out


def load_found(name: str) -> Scenario:
    """A reproducer of scenarios/found/horovod as it is."""
    path = ROOT / "scenarios" / "found" / "horovod" / f"{name}.yaml"
    return parse_scenario(yaml.safe_load(path.read_text()), path.name)


def load(name: str, **knobs: Any) -> Scenario:
    """A shipped scenario with some knobs overridden (None removes a knob)."""
    data = raw(name)
    for k, v in knobs.items():
        if v is None:
            data["protocol"]["knobs"].pop(k, None)
        else:
            data["protocol"]["knobs"][k] = v
    return parse_scenario(data, f"{name}.yaml")


@dataclass
class Run:
    """One simulated run and what the tests read from it."""

    events: list[TraceEvent]
    metrics: Metrics
    result: RunResult
    checks: list[CheckResult]
    expectations: list[ExpectationResult]

    def of(self, kind: str) -> list[TraceEvent]:
        """Events of one kind, in order."""
        return [e for e in self.events if e.kind == kind]

    def epoch_logs(self, *fields: str) -> list[tuple[Any, ...]]:
        """The named fields of each epoch log line."""
        return [tuple(e.get(f) for f in fields) for e in self.of("epoch_log")]

    @property
    def failed_checks(self) -> list[str]:
        """Names of checks with violations."""
        return [c.name for c in self.checks if not c.ok]

    @property
    def unmet(self) -> list[str]:
        """Names of unmet expectations."""
        return [e.name for e in self.expectations if not e.ok]


def simulate_run(sc: Scenario, seed: int = 0) -> Run:
    """Run in the sim, in memory."""
    events, metrics, result = simulate(sc, seed)
    return Run(events, metrics, result, run_checks(events), evaluate(sc.expect, metrics, events))


def names(events: Sequence[TraceEvent]) -> list[str]:
    """The ``proc`` of each event."""
    return [e.proc for e in events]
