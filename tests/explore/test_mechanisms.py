"""A finding is a mechanism: what went wrong (the check, its witness events' kinds, the
roles of their hosts and what they say happened), never the fault types around it; and a
mechanism recorded in scenarios/found/ is known, on any cluster layout."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks import CheckResult, Violation
from elastic_sim.mechanisms import (
    Known,
    Record,
    Signature,
    anonymous,
    error_class,
    parse,
    signatures_of,
)
from elastic_sim.trace import TraceEvent


def ev(t: float, host: str, kind: str, **data: Any) -> TraceEvent:
    return TraceEvent(t, host, f"{host}/main" if host != "*" else "elastic-sim", kind, data)


def run(extra_faults: list[TraceEvent]) -> list[TraceEvent]:
    """h1 holds the store; h0 is rank 0, h2 rank 1; h2's job fails on a store timeout."""
    return [ev(0.0, "*", "run_start", coordinator="h1"),
            *extra_faults,
            ev(1.0, "h0", "rdzv_done", round=0, rank=0, members=["h0", "h2"]),
            ev(1.0, "h2", "rdzv_done", round=0, rank=1, members=["h0", "h2"]),
            ev(5.0, "h2", "job_failed",
               error="StoreTimeout: get ['torch.rendezvous.none.1/MASTER_ADDR']: timeout"),
            ev(6.0, "*", "run_end", outcome="failed")]


def failed(events: list[TraceEvent]) -> list[CheckResult]:
    fail = next(e for e in events if e.kind == "job_failed")
    end = next(e for e in events if e.kind == "run_end")
    return [CheckResult("avoidable_job_failure", "", [Violation("failed", [fail, end])])]


def test_the_faults_around_a_mechanism_do_not_make_another_one() -> None:
    bare = run([])
    crowded = run([ev(0.5, "h0", "fault", id="a", type="clock_jump", target="h0",
                      phase="start"),
                   ev(0.7, "h1", "fault", id="b", type="straggler", target="h1",
                      phase="start")])
    assert list(signatures_of(failed(bare), (), bare)) == list(
        signatures_of(failed(crowded), (), crowded))
    (sig,) = signatures_of(failed(bare), (), bare)
    assert str(sig) == ("avoidable_job_failure@job_failed(member:StoreTimeout MASTER_ADDR),"
                        "run_end(-:failed)")


def test_one_ending_after_different_faults_is_one_mechanism() -> None:
    """A liveness check's window opens at a fault: which fault, on whom, is context (the
    finding counts its types); the mechanism is how the job ended."""
    def stalled(fault: TraceEvent) -> tuple[Signature, ...]:
        events = run([fault])
        fail = next(e for e in events if e.kind == "job_failed")
        checks = [CheckResult("progress_after_faults", "", [Violation("no step", [fault, fail])])]
        return tuple(signatures_of(checks, (), events))

    crash = stalled(ev(2.0, "h0", "fault", id="a", type="crash", target="h0", phase="start"))
    cut = stalled(ev(2.0, "h2", "fault", id="b", type="partition",
                     target=[["h2"], ["h0", "h1"]], phase="start"))
    assert crash == cut
    assert [str(s) for s in crash] == [
        "progress_after_faults@fault,job_failed(member:StoreTimeout MASTER_ADDR)"]


def test_a_mechanism_recorded_with_its_faults_class_and_role_is_known() -> None:
    written = "progress_after_faults@fault(coord+spare:frozen),job_failed(member:X)"
    known = Known({"horovod": [Record(written, "found.yaml")]})
    met = parse("progress_after_faults@fault,job_failed(member:X)")
    assert anonymous(parse(written)) == met
    hit = known.match("horovod", met)
    assert hit is not None and hit.exact and hit.source == "found.yaml"
    moved = known.match("horovod", parse("progress_after_faults@fault,job_failed(rank0:X)"))
    assert moved is not None and not moved.exact
    assert known.match("horovod", parse("progress_after_faults@fault,run_end(-:hung)")) is None


def test_roles_say_who_the_host_was() -> None:
    events = run([])
    for host, role in (("h0", "rank0"), ("h2", "member")):
        fail = ev(5.0, host, "job_failed", error="ChildFailedError: worker group failed")
        got = signatures_of([CheckResult("c", "", [Violation("m", [fail])])], (), events)
        assert [s.who for s in got] == [f"{role}:ChildFailedError"]
    store = ev(0.9, "h1", "exit_barrier_failed", error="StoreTimeout: x")
    (sig,) = signatures_of([CheckResult("c", "", [Violation("m", [store])])], (), events)
    assert sig.who == "coord+spare:StoreTimeout"  # the store's host, in no round yet


def test_an_error_is_named_by_its_class_and_the_store_key_less_round_and_rank() -> None:
    assert error_class("StoreTimeout: wait ['torch.rendezvous.none.0/torchelastic/"
                       "role_info/0', 'x']: timeout") == "StoreTimeout torchelastic/role_info"
    assert error_class("RendezvousConnectionError: store h1:29400: reset") == (
        "RendezvousConnectionError")
    assert error_class("Horovod detected that one or more processes exited (h1[0]: 134)") == (
        "horovod detected that one")


def test_a_mechanism_reads_back_from_its_text() -> None:
    sig = Signature("master_agreement", "rdzv_done,rdzv_done", "coord+member|rank0")
    assert parse(str(sig)) == sig
    assert parse("terminates@fault(rank0:lost),run_end(-:hung)") == Signature(
        "terminates", "fault,run_end", "rank0:lost|-:hung")


def test_a_recorded_mechanism_is_known_on_another_cluster_layout() -> None:
    known = Known({"torchelastic": [Record("master_agreement@rdzv_done(member),"
                                           "rdzv_done(rank0)", "found.yaml")]})
    same = known.match("torchelastic", parse("master_agreement@rdzv_done(member),"
                                              "rdzv_done(rank0)"))
    moved = known.match("torchelastic", parse("master_agreement@rdzv_done(coord+member),"
                                               "rdzv_done(member)"))
    assert same is not None and same.exact
    assert moved is not None and not moved.exact and moved.source == "found.yaml"
    assert known.match("horovod", parse("master_agreement@rdzv_done(member),"
                                        "rdzv_done(rank0)")) is None
    assert known.match("torchelastic", parse("limits@rdzv_done(member)")) is None
