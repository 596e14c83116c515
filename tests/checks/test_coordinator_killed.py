"""A fault that kills the job's coordinator when the coordinator is the job (horovodrun):
nobody is left to record the job's failure, the workers fail at their next reset, and the
run ends failed without a ``job_failed``. ``progress_after_faults`` counted that as no
progress after a later fault (a collective failure half a second on): a false positive
of the Horovod campaigns (triage: horovodrun SIGKILLed, the workers' exit 1 or 134)."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks import run_checks
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario
from tests.protocols.horovod.util import small_job

RAW = small_job("hvd_driver_killed", ["localhost", "127.0.0.1"],
                ["localhost:2", "127.0.0.1:2"],
                [{"id": "k", "type": "crash_process", "proc": "localhost/main", "at": 2.0},
                 {"id": "c", "type": "collective", "host": "127.0.0.1", "mode": "fail",
                  "at": 2.5}])


def check(raw: dict[str, Any], name: str) -> Any:
    events, metrics, _ = simulate(parse_scenario(raw, "<coordinator killed>"), 0)
    return metrics, next(c for c in run_checks(events) if c.name == name)


def test_the_coordinators_death_is_the_jobs_unavoidable_end() -> None:
    metrics, res = check(RAW, "progress_after_faults")
    assert metrics.outcome == "failed"
    # the kill is judged (and holds: the job ended with its coordinator); the collective
    # failure after it finds nothing left to progress
    assert res.ok and res.checked == 1


def test_without_the_kill_the_collective_failure_is_judged_and_recovered_from() -> None:
    raw = {**RAW, "faults": RAW["faults"][1:]}
    metrics, res = check(raw, "progress_after_faults")
    assert res.ok and res.checked == 1
    assert metrics.outcome == "completed"


def test_horovodrun_crash_looped_at_start_is_the_jobs_unavoidable_end() -> None:
    # a crash loop of the driver's host's first process: horovodrun fails at start-up
    # (exit 1, CrashAtStart) before it did anything, so nothing could ever progress (a
    # false positive of the hvd_spare_hosts campaign read it as no progress after the fault)
    raw = {**RAW, "faults": [{"id": "loop", "type": "crash_loop", "host": "localhost",
                              "to": "agent", "starts": 1, "at": 0.0}]}
    metrics, res = check(raw, "progress_after_faults")
    assert metrics.outcome == "failed" and metrics.steps_done == 0
    assert res.ok and res.checked == 1
