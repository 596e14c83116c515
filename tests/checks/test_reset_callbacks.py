"""reset_callback_state: a reset callback is judged against the sync that follows it on its
own process, and only then."""

from __future__ import annotations

from elastic_sim.checks.reset_callbacks import reset_callback_state
from elastic_sim.trace import TraceEvent


def ev(t: float, proc: str, kind: str, **data: object) -> TraceEvent:
    return TraceEvent(t, proc.split("/")[0], proc, kind, dict(data))


def callback(t: float, proc: str, step: int) -> TraceEvent:
    return ev(t, proc, "reset_callback", round=2, rank=0, size=2, epoch=1, step=step,
              digest=f"d{step}")


def sync(t: float, proc: str, step: int) -> TraceEvent:
    return ev(t, proc, "sync", round=2, rank=0, root="h0", step=step, digest=f"d{step}")


def test_a_callback_that_read_what_the_sync_brings_passes() -> None:
    res = reset_callback_state([callback(1.0, "h1/w0", 10), sync(1.1, "h1/w0", 10)])
    assert res.ok and res.checked == 1


def test_a_callback_that_read_its_own_stale_state_fails_with_both_events() -> None:
    cb, sy = callback(1.0, "h1/w0", 0), sync(1.1, "h1/w0", 10)
    res = reset_callback_state([cb, sy])
    (v,) = res.violations
    assert v.witness == [cb, sy] and "read step 0" in v.message and "step 10" in v.message


def test_a_callback_without_a_following_sync_or_on_another_process_is_not_judged() -> None:
    res = reset_callback_state([callback(1.0, "h1/w0", 0), sync(1.1, "h2/w0", 10),
                                callback(2.0, "h1/w0", 5), callback(3.0, "h1/w0", 7),
                                sync(3.1, "h1/w0", 7)])
    assert res.ok and res.checked == 1
