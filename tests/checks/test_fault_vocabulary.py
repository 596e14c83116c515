"""The checks know every fault type of the vocabulary (``faults/model.py``): which hit a host,
which cut the network, which tell a host to leave. Lists typed by hand went stale when issue 13
added types (an ``isolate`` cut nobody, a ``signal`` hit no host), so the checks flagged a host
blacklisted for a signalled worker as healthy and judged a scaled-down host's own failure as
the job failing."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks.facts import Cluster
from elastic_sim.checks.hosts import healthy_hosts_kept
from elastic_sim.checks.jobend import avoidable_job_failure, clean_shutdown
from elastic_sim.trace import TraceEvent


def ev(t: float, host: str, kind: str, proc: str = "", **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def fault(t: float, type_: str, target: Any, phase: str = "start") -> TraceEvent:
    return TraceEvent(t, "*", "fault-injector", "fault",
                      {"id": f"x-{type_}", "type": type_, "target": target, "phase": phase})


def cluster(*events: TraceEvent) -> Cluster:
    c = Cluster()
    for e in (ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0"),
              *(ev(0.0, h, "proc_start") for h in ("h0", "h1", "h2")), *events):
        c.see(e)
    return c


def test_every_cutting_fault_type_cuts() -> None:
    assert cluster(fault(1.0, "isolate", [["h1"], ["h0", "h2"]])).is_cut("h1", "h0")
    assert not cluster(fault(1.0, "isolate", [["h1"], ["h0", "h2"]])).usable("h1")
    assert cluster(fault(1.0, "bridge", [["h1"], ["h0"]])).is_cut("h0", "h1")
    assert cluster(fault(1.0, "isolate_store", [["h0"], ["h1", "h2"]])).is_cut("h2", "h0")
    one_way = cluster(fault(1.0, "one_way_partition", {"src": ["h2"], "dst": ["h0"]}))
    assert one_way.is_cut("h2", "h0") and not one_way.is_cut("h1", "h0")
    healed = cluster(fault(1.0, "isolate", [["h1"], ["h0", "h2"]]),
                     fault(2.0, "isolate", [["h1"], ["h0", "h2"]], "heal"))
    assert not healed.is_cut("h1", "h0")


def test_every_host_fault_type_marks_its_host() -> None:
    for type_ in ("signal", "power_off", "wedge", "crash_loop", "slow_start", "collective",
                  "clock_jump"):
        assert set(cluster(fault(1.0, type_, "h1")).faulted) == {"h1"}, type_
    assert set(cluster(fault(1.0, "conn_reset", ["h1", "h2"])).faulted) == {"h1", "h2"}
    assert set(cluster(fault(1.0, "conn_reset", ["*", "h2"])).faulted) == {"h0", "h1", "h2"}
    assert cluster(fault(1.0, "scale_up", "h1")).faulted == {}
    assert cluster(fault(1.0, "discovery_add", "h1")).faulted == {}


def test_a_host_blacklisted_after_its_signalled_worker_failed_is_not_healthy() -> None:
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0", protocol="horovod",
               knobs={"np": 2, "min_np": 2, "max_np": 2, "reset_limit": 1})
    h = [start, *(ev(0.0, x, "proc_start") for x in ("h0", "h1", "h2")),
         fault(1.0, "signal", "h1"), ev(1.2, "h0", "hvd_blacklist", target="h1",
                                        cooldown_end=None, kill=True)]
    assert healthy_hosts_kept(h).ok
    h[4] = fault(1.0, "link", ["h0", "h2"])  # a fault elsewhere: h1 was healthy
    res = healthy_hosts_kept(h)
    assert not res.ok and "h1 was blacklisted" in res.violations[0].message


def test_the_job_fails_when_a_host_that_was_not_told_to_leave_fails() -> None:
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0", protocol="torchelastic",
               knobs={"min_nodes": 2, "max_nodes": 3, "max_restarts": 3})
    base = [start, *(ev(0.0, x, "proc_start") for x in ("h0", "h1", "h2"))]
    left = [*base, fault(1.0, "scale_down", "h2"),
            ev(1.0, "h2", "job_failed", error="SignalException: SIGTERM"),
            ev(60.0, "h1", "job_failed", error="StoreTimeout"),
            ev(61.0, "*", "run_end", "elastic-sim", outcome="failed")]
    res = avoidable_job_failure(left)
    assert not res.ok and "failed at 60 s (h1: StoreTimeout)" in res.violations[0].message
    assert [e.host for e in res.violations[0].witness][:1] == ["h1"]
    # the leaving host's own failure alone is no failure of the job
    assert avoidable_job_failure([*left[:-3], left[-1]]).ok


def test_an_agent_started_after_the_completion_is_not_judged_by_clean_shutdown() -> None:
    """Static campaign case 12: a scale_up of h0 after the job completed starts an agent
    that finds the store gone and fails; it never took part in the job."""
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h1", protocol="static",
               knobs={"min_hosts": 2, "max_hosts": 3})
    h = [start, *(ev(0.0, x, "proc_start") for x in ("h0", "h1")),
         ev(1.0, "h0", "rdzv_done", round=0, members=["h0", "h1"], rank=0, world_size=2),
         ev(1.0, "h1", "rdzv_done", round=0, members=["h0", "h1"], rank=1, world_size=2),
         ev(5.0, "h0", "job_done"), ev(5.0, "h1", "job_done"),
         ev(5.1, "h0", "proc_exit", code=0), ev(5.2, "h1", "proc_exit", code=0),
         fault(6.0, "scale_up", "h0"), ev(6.0, "h0", "proc_start"),
         ev(7.0, "h0", "job_failed", error="store lost"), ev(7.0, "h0", "proc_exit", code=1),
         ev(7.1, "*", "run_end", "elastic-sim", outcome="completed")]
    assert clean_shutdown(h).ok
    h[-4] = ev(4.0, "h0", "proc_start")  # the same agent, started before the completion
    h.sort(key=lambda e: e.t)
    assert not clean_shutdown(h).ok


def test_a_fault_after_the_completion_exempts_its_host_even_after_an_earlier_fault() -> None:
    """Static campaign case 19: a clock_skew of h0 at 0 s, then a preemption of h0 at the
    completion. Its SIGTERM exit is the preemption's doing, not an unclean shutdown; the
    exemption looked only at the host's first fault."""
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h1", protocol="static",
               knobs={"min_hosts": 2, "max_hosts": 3})
    h = [start, *(ev(0.0, x, "proc_start") for x in ("h0", "h1")),
         fault(0.0, "clock_skew", "h0"), fault(0.001, "clock_skew", "h0", "heal"),
         ev(1.0, "h0", "rdzv_done", round=0, members=["h0", "h1"], rank=0, world_size=2),
         ev(1.0, "h1", "rdzv_done", round=0, members=["h0", "h1"], rank=1, world_size=2),
         ev(5.0, "h1", "job_done"), fault(5.0, "preempt", "h0"),
         ev(5.0, "h0", "proc_exit", code=-15), ev(6.0, "h1", "proc_exit", code=0),
         ev(6.1, "*", "run_end", "elastic-sim", outcome="completed")]
    assert clean_shutdown(h).ok
    h[-4] = fault(5.0, "link", ["h1", "h2"])  # no fault on h0 at the completion: judged
    assert not clean_shutdown(h).ok


def _barrier(gap: float, sync: dict[str, float] | None) -> list[TraceEvent]:
    """Round 0's exit barrier as a real cluster run traced it (stop 23's CI): h2 and h1
    enter, h1 leaves it, and h0's entry is stamped ``gap`` s after that; ``sync``: each
    host's clock uncertainty (clock_sync events), or none (the sim, one machine)."""
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0", protocol="torchelastic",
               knobs={"min_nodes": 2, "max_nodes": 3, "max_restarts": 3})
    syncs = [TraceEvent(0.0, "*", "coordinator", "clock_sync",
                        {"node": i, "hosts": [h], "offset": 0.0, "uncertainty": u})
             for i, (h, u) in enumerate((sync or {}).items())]
    done = 32.496992
    return [start, *syncs, *(ev(0.0, h, "proc_start") for h in ("h0", "h1", "h2")),
            ev(32.476256, "h2", "exit_barrier_enter", round=0, world_size=3),
            ev(32.485176, "h1", "exit_barrier_enter", round=0, world_size=3),
            ev(done, "h1", "exit_barrier_done", round=0),
            ev(done + gap, "h0", "exit_barrier_enter", round=0, world_size=3),
            ev(done + gap + 0.004, "h0", "exit_barrier_done", round=0),
            ev(40.0, "*", "run_end", "elastic-sim", outcome="completed")]


def test_an_exit_barrier_entry_within_the_clocks_uncertainty_may_have_come_first() -> None:
    """In a real cluster run each host's clock is known only within its clock_sync
    uncertainty: an entry stamped after the barrier tripped by less than the two hosts'
    uncertainties together may have come first, and is no evidence that it tripped early.
    Beyond that, and wherever no clock was uncertain (the sim's trace order is the order
    things happened in), the barrier tripped with too few hosts."""
    clocks = {"h0": 0.002048, "h1": 5.2e-05, "h2": 5.2e-05}
    res = healthy_hosts_kept(_barrier(0.000619, clocks))
    assert res.ok and res.checked == 1, res.violations
    late = healthy_hosts_kept(_barrier(0.0025, clocks))
    assert not late.ok
    assert late.violations[0].message == (
        "the barrier of round 0 tripped with 2 of its 3 parties in it (h1, h2)")  # (its
    # world is unknown here: no rdzv_done)
    assert [e.kind for e in late.violations[0].witness] == [
        "exit_barrier_enter", "exit_barrier_enter", "exit_barrier_done"]
    same = healthy_hosts_kept(_barrier(0.000619, None))
    assert not same.ok and "2 of its 3 parties" in same.violations[0].message
    assert not healthy_hosts_kept(_barrier(0.0, None)).ok  # same instant, after: still late
