"""A coordinator that crashes and comes back numbers its rounds afresh: the checks must not
compare its new round 1 with the old round 1 (explore found this false positive with a
``crash_restart`` of Horovod's driver host: membership_agreement, rank_validity,
state_agreement and epoch_isolation all fired on one healthy re-launch)."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks import run_checks
from elastic_sim.checks.incarnations import incarnation_rounds
from elastic_sim.trace import TraceEvent


def ev(t: float, proc: str, kind: str, **data: Any) -> TraceEvent:
    return TraceEvent(t, proc.split("/")[0], proc, kind, data)


def relaunch(restart: bool) -> list[TraceEvent]:
    """Round 1 on h1+h2; h0 (the coordinator) restarts (or, without ``restart``, does not)
    and round 1 forms again on h0+h1."""
    h = [ev(0.0, "*/x", "run_start", coordinator="h0", knobs={}),
         ev(0.0, "h0/main", "proc_start"), ev(0.0, "h1/main", "proc_start"),
         ev(0.0, "h2/main", "proc_start")]
    for i, host in enumerate(("h1", "h2")):
        h.append(ev(1.0, f"{host}/w0", "rdzv_done", round=1, members=["h1", "h2"], rank=i,
                    world_size=2))
        h.append(ev(1.1, f"{host}/w0", "coll_enter", group="hvd1", seq=0, round=1))
    if restart:
        h += [ev(2.0, "h0/main", "proc_exit", code=-9), ev(40.0, "h0/main", "proc_start")]
    for i, host in enumerate(("h0", "h1")):
        h.append(ev(41.0, f"{host}/w1", "rdzv_done", round=1, members=["h0", "h1"], rank=i,
                    world_size=2))
        h.append(ev(41.1, f"{host}/w1", "coll_enter", group="hvd1", seq=0, round=1))
    return h


def failed(events: list[TraceEvent]) -> set[str]:
    names = ("membership_agreement", "rank_validity", "epoch_isolation")
    return {r.name for r in run_checks(events) if not r.ok and r.name in names}


def test_rounds_of_a_restarted_coordinator_are_new_rounds() -> None:
    assert failed(relaunch(restart=True)) == set()
    renamed = [e for e in incarnation_rounds(relaunch(restart=True)) if e.t > 40]
    assert {e.get("round") for e in renamed if e.kind == "rdzv_done"} == {
        "1 (h0 incarnation 2)"}
    assert {e.get("group") for e in renamed if e.kind == "coll_enter"} == {
        "hvd1 (h0 incarnation 2)"}


def test_the_same_round_twice_without_a_restart_still_fails() -> None:
    assert failed(relaunch(restart=False)) == {"membership_agreement", "rank_validity"}


def test_a_restarted_host_is_judged_from_its_new_incarnation_on() -> None:
    """Static campaign case 9: h0 committed step 60, crashed and came back; the fresh process
    restored its own (empty) state. That is no lost progress; a peer synced back to it is."""
    from elastic_sim.checks import committed_progress

    h = [ev(0.0, "h0/main", "proc_start"), ev(0.0, "h1/main", "proc_start"),
         ev(5.0, "h0/main", "commit", step=60), ev(5.0, "h1/main", "commit", step=60),
         ev(6.0, "h0/main", "proc_exit", code=-9), ev(50.0, "h0/main", "proc_start"),
         ev(54.0, "h0/main", "restore", step=0)]
    assert committed_progress(h).ok
    h.append(ev(55.0, "h1/main", "sync", step=0))
    res = committed_progress(h)
    assert not res.ok and "h1 synced to step 0" in res.violations[0].message
    del h[5]  # no restart: the same process going back to step 0 is caught
    assert "h0 restored step 0" in committed_progress(h).violations[0].message
