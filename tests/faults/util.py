"""Run the static protocol on four hosts with given faults; read the outcome."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_sim.pipeline import RunReport, execute
from elastic_sim.scenario import parse_scenario
from elastic_sim.spec import compile_spec
from elastic_sim.trace import TraceEvent

BASE: dict[str, Any] = {
    "name": "faults",
    "time_limit": 600,
    "protocol": {"name": "static",
                 "knobs": {"min_hosts": 2, "max_hosts": 4, "last_call": 1.0,
                           "group_timeout": 30}},
    "cluster": {"hosts": 4},
    "workload": {"steps": 60, "step_time": 0.1, "commit_every": 10, "state_bytes": 65536},
}


@dataclass
class Outcome:
    """What one run did."""

    report: RunReport

    @property
    def events(self) -> list[TraceEvent]:
        """The trace."""
        return self.report.events

    @property
    def faults(self) -> dict[str, Any]:
        """Fault reports by id."""
        return {f.id: f for f in self.report.result.faults}

    def of(self, kind: str, host: str | None = None) -> list[TraceEvent]:
        """Events of ``kind`` (on ``host``)."""
        return [e for e in self.events if e.kind == kind and (host is None or e.host == host)]

    def phases(self, fid: str) -> list[tuple[str, float]]:
        """(phase, time) of the fault's own events."""
        return [(e.get("phase"), e.t) for e in self.of("fault") if e.get("id") == fid]

    @property
    def end(self) -> float:
        """Run end time."""
        return self.report.result.end_time

    @property
    def outcome(self) -> str:
        """completed / failed / hung."""
        return self.report.metrics.outcome

    @property
    def violations(self) -> list[str]:
        """Names of failed checks."""
        return [c.name for c in self.report.checks if not c.ok]


def run(tmp: Path, faults: list[dict[str, Any]], file: str = "<test>",
        **over: Any) -> Outcome:
    """Run the base scenario with ``faults`` (and top-level overrides) in the sim."""
    raw = copy.deepcopy(BASE)
    raw.update(over)
    raw["faults"] = faults
    sc = parse_scenario(raw, file)
    return Outcome(execute(compile_spec(sc, seed=0, file=file), tmp / "run"))


def simulate_with(scenario: Path, faults: list[dict[str, Any]], **top: Any
                  ) -> tuple[list[TraceEvent], str, list[Any]]:
    """Simulate the scenario file with ``faults`` instead of its own and no expectations
    (``top``: other top-level fields replaced, such as ``time_limit``): the trace, the
    outcome and the fault reports."""
    import yaml

    from elastic_sim.pipeline import simulate

    raw = yaml.safe_load(scenario.read_text())
    raw.update(top, faults=faults, expect={})
    events, metrics, result = simulate(parse_scenario(raw, str(scenario)), 0)
    return events, metrics.outcome, result.faults


def first_full(world_sizes: list[int]) -> list[int]:
    """The world sizes from the first round of all four hosts on. A loaded machine can
    start a real host seconds after the others and the first round close without it (its
    last call over): [3, 4, 3] is the run [4, 3] the fault makes, after such a start."""
    return world_sizes[world_sizes.index(4):] if 4 in world_sizes else world_sizes


def sizes_after_a_death(events: list[dict[str, Any]], at: float,
                        group_timeout: float = 30.0) -> list[int]:
    """The world sizes (from the first full round on) a real run of four hosts shows once
    one dies at ``at``: [4, 3] when every survivor sees the death at once; [4, 3 - k] when
    real Gloo leaves k survivors in the failed collective until the group's timeout, as it
    did in 1 of 22 measured trials (../shared/calibration.md: two survivors waited there).
    Those survivors' failures must then be timeouts, at the group's timeout."""
    slow = [e for e in events if e["kind"] == "coll_fail" and e["t"] > at
            and e["data"].get("error") == "CollectiveTimeout"]
    assert all(e["t"] - at >= group_timeout - 1.0 for e in slow), slow
    return [4, 3 - len({e["host"] for e in slow})]
