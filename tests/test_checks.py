"""Each check passes a correct history and catches the violation it is named for,
pointing at the events that witness it."""

from __future__ import annotations

from typing import Any

from protocols.trace import TraceEvent
from reports.checks import (
    collective_sequence,
    committed_progress,
    membership_agreement,
    rank_validity,
    run_checks,
    state_agreement,
)


def ev(t: float, host: str, kind: str, **data: Any) -> TraceEvent:
    return TraceEvent(t, host, f"{host}/main", kind, data)


def formed(rnd: int, members: list[str], t: float = 1.0) -> list[TraceEvent]:
    return [
        ev(t, h, "rdzv_done", round=rnd, members=members, rank=i, world_size=len(members))
        for i, h in enumerate(members)
    ]


def good_history() -> list[TraceEvent]:
    h = formed(0, ["a", "b", "c"])
    h += [ev(1.1, x, "sync", round=0, rank=i, root="a", step=0, digest="d0")
          for i, x in enumerate("abc")]
    for seq, op in enumerate(["allreduce", "broadcast"]):
        h += [ev(1.2 + seq, x, "coll_enter", group="round0", seq=seq, op=op, nbytes=8)
              for x in "abc"]
    h += [ev(2.0, x, "commit", step=10, digest="d10") for x in "abc"]
    h += [ev(2.5, x, "restore", step=10, digest="d10") for x in "ab"]
    h += formed(1, ["a", "b"], 3.0)
    h += [ev(3.1, x, "sync", round=1, rank=i, root="a", step=10, digest="d10")
          for i, x in enumerate("ab")]
    h += [ev(4.0, x, "commit", step=20, digest="d20") for x in "ab"]
    return h


def test_a_correct_history_passes_every_check() -> None:
    results = run_checks(good_history())
    assert [r.name for r in results if not r.ok] == []
    assert all(r.checked > 0 for r in results)


def test_disagreeing_members_are_caught() -> None:
    h = good_history()
    h[1] = ev(1.0, "b", "rdzv_done", round=0, members=["a", "b"], rank=1, world_size=2)
    res = membership_agreement(h)
    assert not res.ok
    assert "round 0" in res.violations[0].message
    assert {e.host for e in res.violations[0].witness} == {"a", "b"}


def test_duplicate_and_out_of_range_ranks_are_caught() -> None:
    h = formed(0, ["a", "b", "c"])
    h[2] = ev(1.0, "c", "rdzv_done", round=0, members=["a", "b", "c"], rank=1, world_size=3)
    res = rank_validity(h)
    assert not res.ok
    assert any("rank 1 held by b and c" in v.message for v in res.violations)
    h[2] = ev(1.0, "c", "rdzv_done", round=0, members=["a", "b", "c"], rank=3, world_size=3)
    assert any("outside 0..2" in v.message for v in rank_validity(h).violations)


def test_members_entering_different_collectives_are_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "coll_enter" and e.host == "c"
             and e.get("seq") == 1)
    h[i] = ev(2.2, "c", "coll_enter", group="round0", seq=1, op="allreduce", nbytes=8)
    res = collective_sequence(h)
    assert not res.ok
    assert "#1" in res.violations[0].message
    assert [e.get("op") for e in res.violations[0].witness] == ["broadcast", "allreduce"]


def test_a_member_that_missed_the_sync_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "sync" and e.host == "c")
    h[i] = ev(1.1, "c", "sync", round=0, rank=2, root="a", step=0, digest="other")
    res = state_agreement(h)
    assert not res.ok
    assert "c holds step 0 digest other" in res.violations[0].message
    assert [e.host for e in res.violations[0].witness] == ["a", "c"]


def test_progress_going_backwards_is_caught() -> None:
    h = good_history()
    # b syncs to a state older than what it had committed: progress lost.
    i = next(i for i, e in enumerate(h) if e.kind == "sync" and e.host == "b"
             and e.get("round") == 1)
    h[i] = ev(3.1, "b", "sync", round=1, rank=1, root="a", step=0, digest="d0")
    res = committed_progress(h)
    assert not res.ok
    assert "synced to step 0, behind its committed step 10" in res.violations[0].message


def test_restoring_something_other_than_the_last_commit_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "restore" and e.host == "a")
    h[i] = ev(2.5, "a", "restore", step=0, digest="d0")
    res = committed_progress(h)
    assert not res.ok
    assert "restored step 0, but its last commit was step 10" in res.violations[0].message
