"""A restart budget only matters once there is a failure to absorb: with torchrun's
default ``max_restarts`` 0 every host has no budget from the start, and a fault-free job
that died with every host healthy (the stale bootstrap of a scale-up, upstream 2.13) passed
``avoidable_job_failure`` and ``rendezvous_closed_by_job_end`` before."""

from __future__ import annotations

from pathlib import Path

import yaml

from elastic_sim.checks import run_checks
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def _scenario(name: str, max_restarts: int) -> Scenario:
    raw = yaml.safe_load((ROOT / "scenarios" / "torchelastic" / name).read_text())
    raw["protocol"]["knobs"]["max_restarts"] = max_restarts
    raw.pop("expect", None)
    return parse_scenario(raw, f"<{name}, max_restarts {max_restarts}>")


def _failed_checks(sc: Scenario) -> set[str]:
    events, metrics, _ = simulate(sc, sc.seed)
    assert metrics.outcome == "failed"
    return {c.name for c in run_checks(events) if not c.ok}


def test_a_fault_free_job_dead_with_healthy_hosts_is_flagged_at_max_restarts_0() -> None:
    failed = _failed_checks(_scenario("scale_up.yaml", 0))
    assert {"avoidable_job_failure", "rendezvous_closed_by_job_end"} <= failed


def test_a_worker_crash_with_no_budget_is_not_avoidable() -> None:
    """max_restarts 0 and a crashed worker: the user asked for no restarts, so the job's
    end is the budget's, not an avoidable failure."""
    failed = _failed_checks(_scenario("worker_crash.yaml", 0))
    assert "avoidable_job_failure" not in failed
    assert "rendezvous_closed_by_job_end" not in failed
