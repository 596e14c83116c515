"""The task services stand for sshd, a daemon outside the job: the run ends once horovodrun
and every worker have ended, even while a task service the driver never reached still
waits. Before, a spare host cut off from the start kept a completed job's run "running" to
its time limit, and ``terminates`` reported a hang that upstream, where horovodrun simply
exits, does not have (about 45 of 102 ``terminates`` findings of the Horovod campaigns)."""

from __future__ import annotations

from elastic_sim.checks import run_checks
from elastic_sim.scenario import parse_scenario
from tests.protocols.horovod.util import simulate_run, small_job

RAW = small_job("hvd_unreached_sshd", ["localhost", "127.0.0.1", "spare"],
                ["localhost:2", "127.0.0.1:2"])


def test_a_task_service_the_driver_never_reached_does_not_keep_the_run_going() -> None:
    raw = {**RAW, "faults": [{"id": "cut", "type": "isolate", "host": "spare", "at": 0,
                              "duration": 800}]}
    run = simulate_run(parse_scenario(raw, "<unreached sshd>"))
    assert run.metrics.outcome == "completed" and not run.result.hung
    (driver_exit,) = [e for e in run.of("proc_exit") if e.proc == "localhost/main"]
    assert driver_exit.get("code") == 0
    # the run ends with horovodrun (no wait for a host it never reached) ...
    assert run.result.end_time == driver_exit.t < 10.0
    # ... and the spare's sshd stand-in is left running, without an exit code
    assert "spare/main" not in run.result.exit_codes
    assert not [e for e in run.of("proc_exit") if e.host == "spare"]
    assert next(c for c in run_checks(run.events) if c.name == "terminates").ok


def test_a_reachable_idle_task_service_is_still_told_and_ends_in_the_trace() -> None:
    run = simulate_run(parse_scenario(RAW, "<idle sshd>"))
    assert run.metrics.outcome == "completed" and not run.result.hung
    (spare_exit,) = [e for e in run.of("proc_exit") if e.proc == "spare/main"]
    assert spare_exit.get("code") == 0 and run.result.exit_codes["spare/main"] == 0
