"""The model's pure decisions, rule by rule: the Lighthouse's quorum_compute and id rule,
and compute_quorum_results. (The differential tests hold them to torchft's own servers.)"""

from __future__ import annotations

from elastic_sim.protocols.torchft.lighthouse_rules import (
    Joined,
    LighthouseCore,
    LighthouseSettings,
    LighthouseState,
    next_quorum_id,
    quorum_compute,
)
from elastic_sim.protocols.torchft.quorum import Quorum, QuorumMember
from elastic_sim.protocols.torchft.results import compute_quorum_results

SETTINGS = LighthouseSettings(min_replicas=2, join_timeout=1.0, quorum_tick=0.1,
                              heartbeat_timeout=5.0)


def m(rid: str, step: int = 0, shrink: bool = False, failures: int = 0) -> QuorumMember:
    return QuorumMember(rid, f"{rid}/rank0:1", f"{rid}:29600", step, 1, shrink, failures)


def state(now: float, asked: dict[str, float], beats: dict[str, float],
          prev: list[str] | None = None, shrink: frozenset[str] = frozenset()) -> LighthouseState:
    st = LighthouseState()
    st.participants = {r: Joined(t, m(r, shrink=r in shrink)) for r, t in asked.items()}
    st.heartbeats = {**beats, **asked}
    if prev is not None:
        st.prev_quorum = Quorum(1, tuple(m(r) for r in prev))
        st.quorum_id = 1
    return st


def test_a_quorum_needs_min_replicas_healthy_participants() -> None:
    d = quorum_compute(0.0, state(0.0, {"a": 0.0}, {}), SETTINGS)
    assert d.members is None and "need min_replicas 2" in d.reason


def test_a_quorum_needs_a_strict_majority_of_the_heartbeating_replicas() -> None:
    beats = {"c": 0.0, "d": 0.0}
    d = quorum_compute(0.0, state(0.0, {"a": 0.0, "b": 0.0}, beats), SETTINGS)
    assert d.members is None and "need at least half of 4 healthy workers" in d.reason


def test_stragglers_are_waited_for_until_the_join_timeout() -> None:
    st = state(0.0, {"a": 0.0, "b": 0.0}, {"c": 0.0})
    assert quorum_compute(0.9, st, SETTINGS).members is None
    d = quorum_compute(1.0, st, SETTINGS)
    assert d.kind == "valid" and [x.replica_id for x in d.members or ()] == ["a", "b"]


def test_a_replica_whose_heartbeat_is_too_old_is_not_waited_for() -> None:
    st = state(0.0, {"a": 4.0, "b": 4.0}, {"c": 0.0})
    assert quorum_compute(4.9, st, SETTINGS).members is None  # c still heartbeating
    assert quorum_compute(5.0, st, SETTINGS).kind == "valid"  # its heartbeat is 5 s old


def test_the_previous_members_all_back_make_a_fast_quorum_newcomers_included() -> None:
    st = state(0.0, {"a": 0.0, "b": 0.0, "n": 0.0}, {"c": 0.0, "d": 0.0, "e": 0.0},
               prev=["a", "b"])
    d = quorum_compute(0.0, st, SETTINGS)
    assert d.kind == "fast" and [x.replica_id for x in d.members or ()] == ["a", "b", "n"]


def test_shrink_only_keeps_newcomers_out() -> None:
    st = state(0.0, {"a": 0.0, "b": 0.0, "n": 0.0}, {}, prev=["a", "b"],
               shrink=frozenset({"a"}))
    d = quorum_compute(0.0, st, SETTINGS)
    assert d.kind == "fast" and [x.replica_id for x in d.members or ()] == ["a", "b"]


def test_shrink_only_can_issue_an_empty_quorum_after_which_every_quorum_is_fast() -> None:
    """Upstream's counts use every healthy participant, its members only the previous
    quorum's: newcomers asking to shrink make a valid quorum with nobody in it, and an
    empty previous quorum makes the next one fast whatever min_replicas says."""
    st = state(0.0, {"x": 0.0, "y": 0.0}, {}, prev=["a"], shrink=frozenset({"x"}))
    st.heartbeats["a"] = -10.0  # a is gone
    d = quorum_compute(0.0, st, SETTINGS)
    assert d.kind == "valid" and d.members == ()
    st.prev_quorum = Quorum(2, ())
    st.participants = {"z": Joined(0.0, m("z"))}
    assert quorum_compute(0.0, st, SETTINGS).kind == "fast"


def test_the_id_is_bumped_on_a_membership_change_or_on_commit_failures_only() -> None:
    st = state(0.0, {}, {}, prev=["a", "b"])
    assert next_quorum_id(st, [m("a"), m("b")]) == (1, None)
    assert next_quorum_id(st, [m("a"), m("b", failures=1)]) == (2, "commit_failures")
    assert next_quorum_id(st, [m("a")]) == (2, "membership")


def test_a_waiter_left_out_asks_again_and_is_answered_by_the_next_quorum() -> None:
    core = LighthouseCore(LighthouseSettings(1, 60.0, 0.1, 5.0))
    assert [q.replica_ids for _, q in core.request(0.0, m("a"), "a", 60.0)] == [["a"]]
    core.request(0.1, m("n"), "n", 60.0)  # newcomer, waits: a is not back
    out = core.request(0.2, m("a", shrink=True), "a2", 60.0)  # a back, shrinking
    assert [(t, q.replica_ids) for t, q in out] == [("a2", ["a"])]
    assert "n" in core.state.participants  # n asked again
    out = core.request(0.3, m("a"), "a3", 60.0)
    assert sorted(t for t, _ in out) == ["a3", "n"]  # type: ignore[type-var]


def test_replicas_behind_heal_round_robin_over_the_up_to_date_ones_per_group_rank() -> None:
    q = Quorum(3, (m("g0", 5), m("g1", 5), m("g2", 0), m("g3", 4)))
    for rank, sources in ((0, {2: 0, 3: 1}), (1, {2: 1, 3: 0})):
        for dst, src in sources.items():
            res = compute_quorum_results(f"g{dst}", rank, q)
            assert res.heal and res.recover_src_replica_rank == src
            assert res.recover_src_manager_address == f"g{src}/rank0:1"
    assert compute_quorum_results("g0", 0, q).recover_dst_replica_ranks == [2]
    assert compute_quorum_results("g0", 1, q).recover_dst_replica_ranks == [3]
    res = compute_quorum_results("g2", 1, q)
    assert (res.max_step, res.max_replica_rank, res.max_world_size) == (5, None, 2)
    assert compute_quorum_results("g0", 1, q).store_address == "g1:29600"  # primary 1 % 2


def test_at_step_0_with_init_sync_everyone_but_the_primary_heals() -> None:
    q = Quorum(1, (m("a"), m("b"), m("c")))
    assert [compute_quorum_results(r, 1, q).heal for r in "abc"] == [True, False, True]
    assert not any(compute_quorum_results(r, 1, q, init_sync=False).heal for r in "abc")
