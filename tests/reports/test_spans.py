"""The timeline model: what every process was doing when."""

from __future__ import annotations

from elastic_sim.reports.spans import fault_spans, timelines
from elastic_sim.trace import TraceEvent
from tests.reports.synth import static_run


def test_survivors_train_then_rendezvous_sync_and_train_again_after_a_crash() -> None:
    tls = {tl.proc: tl for tl in timelines(static_run())}
    h0 = tls["h0/main"]
    assert [s.state for s in h0.phases] == ["rendezvous", "sync", "training",
                                            "rendezvous", "sync", "training"]
    training0, rdzv1 = h0.phases[2], h0.phases[3]
    # The first world trains until the failed allreduce is seen (crash 2.55 + detection).
    assert training0.end == rdzv1.start == 2.708
    assert rdzv1.end == 3.708 and rdzv1.round == 1
    assert h0.ending == "done"
    assert ("collective_failed", "restore") in h0.transitions()


def test_crashed_process_is_down_from_the_crash_to_the_end_of_the_run() -> None:
    tls = {tl.proc: tl for tl in timelines(static_run())}
    h3 = tls["h3/main"]
    assert h3.phases[-1].state == "training" and h3.phases[-1].end == 2.55
    down = [s for s in h3.overlays if s.state == "down"]
    assert [(d.start, d.end) for d in down] == [(2.55, 7.714)]
    assert h3.exits == [(2.55, -9)] and h3.ending == "crashed"


def test_timelines_are_ordered_by_host_naturally_and_skip_pseudo_processes() -> None:
    procs = [tl.proc for tl in timelines(static_run(hosts=12, crash_host=None, steps=3))]
    assert procs == [f"h{i}/main" for i in range(12)]


def _hang_trace() -> list[TraceEvent]:
    """h0 waits 2 s in an allreduce for h1, which is frozen by a hang fault."""
    def ev(t: float, host: str, kind: str, **data: object) -> TraceEvent:
        proc = "fault-injector" if kind == "fault" else f"{host}/main"
        return TraceEvent(t, host, proc, kind, data)

    g = {"group": "round0", "op": "allreduce"}
    return [
        ev(0.0, "h0", "sync", round=0, step=0), ev(0.0, "h1", "sync", round=0, step=0),
        ev(1.0, "h1", "fault", id="freeze", type="hang", target="h1", phase="start"),
        ev(1.1, "h0", "coll_enter", seq=1, **g),
        ev(3.0, "h1", "fault", id="freeze", type="hang", target="h1", phase="heal"),
        ev(3.0, "h1", "coll_enter", seq=1, **g),
        ev(3.01, "h0", "coll_done", seq=1, **g), ev(3.01, "h1", "coll_done", seq=1, **g),
        ev(3.01, "h0", "step", round=0, step=1), ev(3.01, "h1", "step", round=0, step=1),
        ev(3.02, "h0", "job_done", step=1), ev(3.02, "h1", "job_done", step=1),
    ]


def test_a_peer_waiting_for_a_hung_host_is_blocked_and_the_host_stopped() -> None:
    tls = {tl.proc: tl for tl in timelines(_hang_trace())}
    assert [(s.state, s.start, s.end) for s in tls["h0/main"].overlays] == [
        ("blocked", 1.1, 3.0)]
    assert [(s.state, s.start, s.end) for s in tls["h1/main"].overlays] == [
        ("stopped", 1.0, 3.0)]
    assert [f.end for f in fault_spans(_hang_trace())] == [3.0]


def test_a_group_that_never_becomes_ready_counts_as_blocked() -> None:
    events = [
        TraceEvent(0.0, "h0", "h0/main", "rdzv_join", {"round": 0}),
        TraceEvent(1.0, "h0", "h0/main", "rdzv_done", {"round": 0, "members": ["h0", "h1"],
                                                        "rank": 0, "world_size": 2}),
        TraceEvent(1.0, "h0", "h0/main", "group_init", {"group": "round0", "rank": 0}),
        TraceEvent(31.0, "h0", "h0/main", "restore", {"step": 0}),
        TraceEvent(31.0, "h0", "h0/main", "rdzv_join", {"round": 1}),
    ]
    (tl,) = timelines(events)
    assert [(s.state, s.start, s.end) for s in tl.overlays] == [("blocked", 1.0, 31.0)]
    assert "group_failed" in tl.path
