"""clean_shutdown judges the protocol's own shutdown, not what a fault did to it: a host a
fault took down in or after the exit barrier (a preemption at its barrier's trip, a
crash_restart once the workers were done), a worker a fault killed at the job's end, a host
told to leave (its SignalException exit), and the others' errors once a fault hit a host
finishing the job (the coordinator's store crashed as the workers exited) are no errors of
the protocol's; the same errors with no fault to explain them still are."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks.jobend import clean_shutdown
from elastic_sim.trace import TraceEvent

HOSTS = ("h0", "h1", "h2")


def ev(t: float, host: str, kind: str, proc: str = "", **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def fault(t: float, type_: str, target: Any, phase: str = "start") -> TraceEvent:
    return TraceEvent(t, "*", "fault-injector", "fault",
                      {"id": f"x-{type_}", "type": type_, "target": target, "phase": phase})


def job(*extra: TraceEvent) -> list[TraceEvent]:
    """Three agents train to step 10 (the last at 9 s), their workers exit at 10 s, each
    agent records job_done and passes the exit barrier of round 0, and exits 0."""
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0",
               protocol="torchelastic", knobs={"min_nodes": 2, "max_nodes": 3,
                                               "max_restarts": 3})
    h = [start, *(ev(0.0, x, "proc_start") for x in HOSTS),
         *(ev(1.0, x, "rdzv_done", round=0, members=list(HOSTS), rank=i, world_size=3)
           for i, x in enumerate(HOSTS)),
         ev(9.0, "h0", "step", round=0, step=10),
         *(ev(10.0, x, "proc_exit", f"{x}/w0", code=0) for x in HOSTS),
         *(ev(10.1, x, "job_done", step=10) for x in HOSTS),
         *(ev(10.1, x, "exit_barrier_enter", round=0, world_size=3) for x in HOSTS),
         *(ev(10.2, x, "exit_barrier_done", round=0) for x in HOSTS),
         *(ev(10.3, x, "proc_exit", code=0) for x in HOSTS), *extra,
         ev(11.0, "*", "run_end", "elastic-sim", outcome="completed")]
    return sorted(h, key=lambda e: e.t)


def without(h: list[TraceEvent], kind: str, host: str) -> list[TraceEvent]:
    return [e for e in h if not (e.kind == kind and e.host == host)]


def test_a_clean_shutdown_passes() -> None:
    res = clean_shutdown(job())
    assert res.ok and res.checked == 3


def test_a_barrier_that_never_completes_with_no_fault_is_caught() -> None:
    h = without(without(job(), "exit_barrier_done", "h2"), "proc_exit", "h2")
    res = clean_shutdown(h)
    assert not res.ok
    assert "h2/main entered the exit barrier of round 0 and never saw it complete" in \
        res.violations[0].message


def test_a_host_a_fault_took_down_in_the_barrier_is_not_its_error() -> None:
    # preempted at its own exit_barrier_enter: it never sees the barrier complete
    h = without(without(job(), "exit_barrier_done", "h2"), "proc_exit", "h2")
    h = sorted([*h, fault(10.1, "preempt", "h2"), ev(10.15, "h2", "proc_exit", code=-15)],
               key=lambda e: e.t)
    assert clean_shutdown(h).ok


def test_a_crash_restart_once_the_workers_are_done_is_not_its_error() -> None:
    """The workers have exited 0 at 10 s, the agents say job_done at 10.1 s: a
    crash_restart of h1 between takes its agent down at the job's end."""
    h = without(without(without(job(), "exit_barrier_done", "h1"), "proc_exit", "h1"),
                "job_done", "h1")
    h = sorted([*h, fault(10.05, "crash_restart", "h1"),
                ev(10.05, "h1", "proc_exit", code=-9, reason="host crashed")],
               key=lambda e: e.t)
    assert clean_shutdown(h).ok


def test_a_worker_killed_at_the_jobs_end_is_not_its_error() -> None:
    h = [e if not (e.kind == "proc_exit" and e.proc == "h1/w0") else
         ev(10.0, "h1", "proc_exit", "h1/w0", code=-9, reason="killed by SIGKILL")
         for e in job(fault(10.0, "crash_process", "h1/w0"))]
    assert clean_shutdown(sorted(h, key=lambda e: e.t)).ok


def test_a_host_told_to_leave_before_the_end_is_leaving() -> None:
    h = [e if not (e.kind == "proc_exit" and e.proc == "h2/main") else
         ev(10.3, "h2", "proc_exit", code=1, reason="SignalException")
         for e in job(fault(5.0, "preempt", "h2"))]
    assert clean_shutdown(sorted(h, key=lambda e: e.t)).ok


def test_the_others_errors_once_a_fault_hit_the_coordinator_at_the_end_are_its_doing() -> None:
    h = [*job(fault(10.0, "store_crash", "h0")),
         ev(10.15, "h1", "exit_barrier_failed", error="StoreConnectionError: store gone"),
         ev(10.15, "h1", "rdzv_shutdown_failed", error="RendezvousConnectionError")]
    res = clean_shutdown(sorted(h, key=lambda e: e.t))
    assert res.ok and res.status == "n/a"
    assert res.not_judged == ("x-store_crash (store_crash) hit a host finishing the job at "
                              "10 s, at its end: the shutdown is its doing")
    mid = [fault(5.0, "store_crash", "h0") if e.kind == "fault" else e for e in h]
    assert not clean_shutdown(sorted(mid, key=lambda e: e.t)).ok  # before the last step


def test_a_fault_triggered_by_the_last_commit_is_at_the_jobs_end() -> None:
    """A crash_process of h1's agent fired by the last commit (at its instant, 9 s): h0 and
    h2 then wait out the exit barrier, the fault's doing; the same fault a step earlier is
    before the end, and the others' barrier timeouts are the protocol's."""
    def run(at: float) -> list[TraceEvent]:
        h = without(without(without(job(), "exit_barrier_done", "h1"), "proc_exit", "h1"),
                    "job_done", "h1")
        h = [e for e in h if not (e.kind == "exit_barrier_done")]
        return sorted([*h, ev(9.0, "h0", "commit", round=0, step=10),
                       fault(at, "crash_process", "h1/main"),
                       ev(at, "h1", "proc_exit", code=-9, reason="killed by SIGKILL"),
                       *(ev(310.1, x, "exit_barrier_failed", error="StoreTimeout: barrier")
                         for x in ("h0", "h2"))], key=lambda e: e.t)

    assert clean_shutdown(run(9.0)).ok
    early = [*run(8.0), ev(8.5, "h0", "step", round=0, step=9)]
    assert not clean_shutdown(sorted(early, key=lambda e: e.t)).ok
