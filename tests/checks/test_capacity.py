"""The job's capacity to go on, as the checks count it: hosts that will still start before
a waiting host's join deadline count, a host told to leave does not, a restart budget is
spent only by a failure (a host that needs no restart goes on whatever its budget, a
coordinator that counts every reset spends its budget on a membership change), and the
coordinator's store is capacity's single point of failure even when its host lives on."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks.capacity import Capacity, replay
from elastic_sim.checks.jobend import avoidable_job_failure, rendezvous_closed_by_job_end
from elastic_sim.trace import TraceEvent

TE = {"min_nodes": 2, "max_nodes": 3, "max_restarts": 0, "join_timeout": 600.0}


def ev(t: float, host: str, kind: str, proc: str = "", **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def fault(t: float, type_: str, target: Any, phase: str = "start") -> TraceEvent:
    return TraceEvent(t, "*", "fault-injector", "fault",
                      {"id": f"x-{type_}", "type": type_, "target": target, "phase": phase})


def start(protocol: str = "torchelastic", **knobs: Any) -> TraceEvent:
    return ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0", protocol=protocol,
              knobs=knobs or TE)


def closed_in_first_rendezvous(late_at: float) -> list[TraceEvent]:
    """h0 and h1 wait in their first rendezvous; a SIGINT makes h1 close it for everyone at
    5 s; h2 starts at ``late_at``."""
    return [start(), ev(0.0, "h0", "proc_start"), ev(0.0, "h1", "proc_start"),
            ev(0.0, "h0", "rdzv_join", round=0), ev(0.0, "h1", "rdzv_join", round=0),
            fault(5.0, "signal", "h1"), ev(5.0, "h1", "job_failed", error="KeyboardInterrupt"),
            ev(5.0, "h1", "rdzv_shutdown", closed=True),
            ev(5.1, "h0", "job_failed", error="RendezvousClosedError"),
            ev(5.1, "h0", "rdzv_shutdown", closed=True),
            ev(5.2, "h0", "proc_exit", code=1), ev(5.2, "h1", "proc_exit", code=130),
            ev(late_at, "h2", "proc_start"), ev(late_at + 60, "h2", "job_failed", error="gone"),
            ev(late_at + 60, "h2", "proc_exit", code=1),
            ev(late_at + 60, "*", "run_end", "elastic-sim", outcome="failed")]


def test_a_host_starting_before_the_join_deadline_makes_a_close_avoidable() -> None:
    h = closed_in_first_rendezvous(late_at=10.0)
    res = rendezvous_closed_by_job_end(h)
    assert not res.ok
    (v,) = res.violations
    assert "h2 started within the join deadline (600 s)" in v.message
    assert "1 host (h0)" in v.message  # h1 was told to leave: not capacity
    assert [(e.host, e.kind) for e in v.witness] == [("h1", "job_failed"),
                                                     ("h1", "rdzv_shutdown")]
    assert not avoidable_job_failure(h).ok  # judged at h0's failure (h1 was leaving)


def test_a_host_starting_after_the_join_deadline_does_not() -> None:
    h = closed_in_first_rendezvous(late_at=700.0)
    assert rendezvous_closed_by_job_end(h).ok and avoidable_job_failure(h).ok
    assert rendezvous_closed_by_job_end(h).checked == 2


def _capacity(events: list[TraceEvent]) -> Capacity:
    """The capacity once every event is taken into account."""
    *_, (_, cap) = replay(events)
    return cap


def test_only_a_failure_spends_a_hosts_budget() -> None:
    """max_restarts 0 (torchrun's default): hosts whose world never failed can go on after
    a fault elsewhere; once a member of their world died, each needs a restart it has
    not."""
    world = [ev(1.0, h, "rdzv_done", round=0, members=["h0", "h1"], rank=i, world_size=2)
             for i, h in enumerate(("h0", "h1"))]
    base = [start(), *(ev(0.0, h, "proc_start") for h in ("h0", "h1", "h2")), *world,
            fault(2.0, "clock_skew", "h2")]
    cap = _capacity(base)
    assert cap.able(3.0) == ["h0", "h1", "h2"] and cap.enough(3.0)
    cap = _capacity([*base, fault(4.0, "crash", "h1"),
                     ev(4.0, "h1", "proc_exit", code=-9, reason="host crashed")])
    assert cap.needs_restart("h0") and not cap.budget_left("h0")
    assert cap.able(5.0) == ["h2"] and not cap.enough(5.0)


def test_a_membership_change_spends_a_job_wide_reset_budget() -> None:
    """Horovod's reset_limit counts every reset, scale-ups and scale-downs included: once
    it is spent, a change of what discovery offers leaves the job no way on."""
    knobs = {"np": 2, "min_np": 2, "max_np": 3, "reset_limit": 1}
    h = [start("horovod", **knobs), *(ev(0.0, x, "proc_start") for x in ("h0", "h1", "h2")),
         ev(0.0, "h0", "hvd_discovery", poll=1, update="added", hosts=["h0:1", "h1:1"]),
         ev(0.1, "h0", "hvd_assign", rendezvous=1, world_size=2, ranks={"h0:0": 0, "h1:0": 1},
            spawn=[]),
         ev(2.0, "h0", "hvd_discovery", poll=2, update="added",
            hosts=["h0:1", "h1:1", "h2:1"]),
         ev(2.1, "h0", "hvd_assign", rendezvous=2, world_size=3,
            ranks={"h0:0": 0, "h1:0": 1, "h2:0": 2}, spawn=[])]
    assert _capacity(h).enough(3.0)  # one reset spent, none needed now
    changed = [*h, ev(4.0, "h0", "hvd_discovery", poll=3, update="removed",
                      hosts=["h0:1", "h1:1"])]
    cap = _capacity(changed)
    assert cap.needs_restart("h0") and not cap.budget_left("h0") and not cap.enough(4.1)
    failed = [*changed, ev(4.2, "h0", "job_failed", error="reset limit"),
              ev(4.3, "*", "run_end", "elastic-sim", outcome="failed")]
    assert avoidable_job_failure(failed).ok


def test_a_crashed_store_leaves_no_host_able_though_its_host_lives() -> None:
    h = [start(**{**TE, "max_restarts": 3}),
         *(ev(0.0, x, "proc_start") for x in ("h0", "h1", "h2"))]
    assert _capacity(h).enough(1.0)
    crashed = [*h, fault(2.0, "store_crash", "h0")]
    cap = _capacity(crashed)
    assert cap.cluster.is_alive("h0") and cap.able(2.0) == [] and not cap.enough(2.0)
    failed = [*crashed, ev(2.1, "h1", "job_failed", error="RendezvousConnectionError"),
              ev(2.2, "*", "run_end", "elastic-sim", outcome="failed")]
    assert avoidable_job_failure(failed).ok
    elsewhere = [*h, fault(2.0, "store_crash", "h2")]  # an agent store, not the coordinator's
    assert _capacity(elsewhere).enough(2.0)
    back = [*crashed, ev(3.0, "h0", "proc_exit", code=1), ev(4.0, "h0", "proc_start")]
    assert _capacity(back).enough(4.0)  # a new incarnation hosts a new store


def test_a_fault_on_a_hosts_links_hits_it_and_one_on_any_hosts_links_hits_all_up() -> None:
    """A link fault between h2 and any host, from 0 s (before any host started), hits h2;
    while one between any two hosts lasts, every host that is up or starts is hit; after
    it heals, a host that starts is not."""
    from elastic_sim.checks.facts import Cluster

    cluster = Cluster()
    for e in [start(), TraceEvent(0.0, "*", "fault-injector", "fault",
                                  {"id": "slow-h2", "type": "link", "target": ["h2", "*"],
                                   "phase": "start"}),
              ev(0.0, "h1", "proc_start"), ev(0.0, "h2", "proc_start")]:
        cluster.see(e)
    assert set(cluster.faulted) == {"h1", "h2"}  # h1 started under a fault naming "*"
    everyone = [TraceEvent(0.5, "*", "fault-injector", "fault",
                           {"id": "slow-h2", "type": "link", "target": ["h2", "*"],
                            "phase": "heal"}),
                fault(1.0, "link", ["*", "*"]), ev(2.0, "h3", "proc_start"),
                fault(3.0, "link", ["*", "*"], "heal"), ev(4.0, "h4", "proc_start")]
    for e in everyone:
        cluster.see(e)
    assert set(cluster.faulted) == {"h1", "h2", "h3"}
