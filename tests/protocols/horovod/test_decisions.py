"""Horovod's driver decisions are pure functions over plain data; they are specified here
(host order, rank assignment, update classification, blacklist cooldown, the barrier's
decision table, the discovery schedule)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_sim.protocols.horovod.discovery import (
    DiscoveryError,
    DiscoverySource,
    Probe,
    epoch_hosts,
    random_step,
    scheduled_hosts,
)
from elastic_sim.protocols.horovod.hosts import (
    HostState,
    HostUpdateResult,
    blacklist,
    classify_update,
    host_assignments,
    is_excluded,
    is_resurrected,
    order_hosts,
    parse_host_slots,
    whitelist,
)
from elastic_sim.protocols.horovod.registry import (
    RESET_LIMIT_EXCEEDED_MESSAGE,
    WorkerState,
    decide_trip,
)
from elastic_sim.protocols.horovod.settings import (
    Discovery,
    DiscoveryFailure,
    HostsAt,
    RandomHosts,
    load_knobs,
)
from elastic_sim.protocols.horovod.state import newer_updates

R, S, F = WorkerState.READY, WorkerState.SUCCESS, WorkerState.FAILURE


# -- host order -------------------------------------------------------------------------

def test_surviving_hosts_keep_their_order_and_new_hosts_are_appended() -> None:
    assert order_hosts(["c", "a", "b"], ["a", "b", "c", "d"], None) == ["c", "a", "b", "d"]
    assert order_hosts(["c", "a", "b"], ["b", "c"], None) == ["c", "b"]


@given(st.lists(st.sampled_from("abcdefgh"), unique=True),
       st.lists(st.sampled_from("abcdefgh"), unique=True), st.integers(0, 2**32))
def test_order_is_old_hosts_in_old_order_then_new_ones(
    prev: list[str], avail: list[str], seed: int
) -> None:
    order = order_hosts(prev, avail, random.Random(seed))
    kept = [h for h in prev if h in avail]
    assert order[: len(kept)] == kept
    assert sorted(order) == sorted(avail)


def test_new_hosts_come_in_a_seeded_permutation_standing_in_for_set_order() -> None:
    orders = {tuple(order_hosts([], list("abcdef"), random.Random(s))) for s in range(20)}
    assert len(orders) > 1
    assert order_hosts([], list("abcdef"), random.Random(3)) == order_hosts(
        [], list("abcdef"), random.Random(3))


# -- assignment -------------------------------------------------------------------------

def test_ranks_go_host_by_host_with_local_and_cross_ranks() -> None:
    by_host, ranked = host_assignments(["a", "b"], {"a": 2, "b": 3}, 1, None)
    assert [(s.hostname, s.local_rank, s.rank) for s in ranked] == [
        ("a", 0, 0), ("a", 1, 1), ("b", 0, 2), ("b", 1, 3), ("b", 2, 4)]
    assert [s.cross_rank for s in ranked] == [0, 0, 1, 1, 0]
    assert [s.cross_size for s in ranked] == [2, 2, 2, 2, 1]
    assert [s.local_size for s in ranked] == [2, 2, 3, 3, 3]
    assert {s.size for s in ranked} == {5}
    assert [s.rank for s in by_host["b"]] == [2, 3, 4]


def test_max_np_caps_the_world_and_idle_hosts_get_nothing() -> None:
    by_host, ranked = host_assignments(["a", "b", "c"], {"a": 2, "b": 2, "c": 1}, 1, 3)
    assert len(ranked) == 3 and list(by_host) == ["a", "b"]
    assert [s.local_rank for s in by_host["b"]] == [0]


def test_fewer_slots_than_min_np_is_an_error() -> None:
    with pytest.raises(ValueError):
        host_assignments(["a"], {"a": 2}, 3, None)


def test_rank_and_size_are_stable_for_surviving_slots_when_a_host_is_added() -> None:
    _, before = host_assignments(["a", "b"], {"a": 2, "b": 2}, 2, None)
    _, after = host_assignments(order_hosts(["a", "b"], ["c", "a", "b"], None),
                                {"a": 2, "b": 2, "c": 2}, 2, None)
    assert [(s.hostname, s.local_rank, s.rank) for s in after[:4]] == [
        (s.hostname, s.local_rank, s.rank) for s in before]


def test_discovery_lines_parse_to_host_slots() -> None:
    assert parse_host_slots(["a:2", "", "b", " c:3 "], 4) == {"a": 2, "b": 4, "c": 3}


# -- update classification --------------------------------------------------------------

@pytest.mark.parametrize(("prev", "cur", "res"), [
    ({"a": 2}, {"a": 2}, HostUpdateResult.no_update),
    ({"a": 2}, {"a": 2, "b": 2}, HostUpdateResult.added),
    ({"a": 2, "b": 2}, {"a": 2}, HostUpdateResult.removed),
    ({"a": 2, "b": 2}, {"a": 2, "c": 2}, HostUpdateResult.mixed),
    ({"a": 2}, {"a": 3}, HostUpdateResult.added),
    ({"a": 2}, {"a": 1}, HostUpdateResult.removed),
    ({"a": 2, "b": 1}, {"a": 1, "b": 2}, HostUpdateResult.mixed),
])
def test_updates_are_classified_added_removed_or_mixed(
    prev: dict[str, int], cur: dict[str, int], res: HostUpdateResult
) -> None:
    assert classify_update(cur, prev) == res


def test_a_host_back_from_cooldown_counts_as_added() -> None:
    assert classify_update({"a": 2}, {"a": 2}, ["a"]) == HostUpdateResult.added


# -- blacklist and cooldown -------------------------------------------------------------

def test_without_a_cooldown_range_a_blacklist_is_permanent() -> None:
    hs, kill = blacklist(HostState(), 100.0, None, 0.5)
    assert kill and hs.blacklisted and hs.cooldown_end == 0
    assert not is_resurrected(hs, 1e9) and is_excluded(hs, 1e9)


def test_cooldown_doubles_per_failure_with_jitter_and_is_clamped() -> None:
    hs, kill = blacklist(HostState(), 100.0, (1.0, 100.0), 0.5)
    assert kill and hs.count == 1 and hs.cooldown_end == 100.0 + 2 * 1 + 0.5
    hs = whitelist(hs)
    hs, _ = blacklist(hs, 200.0, (1.0, 100.0), 0.0)
    assert hs.count == 2 and hs.cooldown_end == 200.0 + 4
    clamped, _ = blacklist(HostState(count=10), 0.0, (1.0, 2.0), 0.9)
    assert clamped.cooldown_end == 2.0


def test_a_host_still_cooling_down_is_not_killed_again() -> None:
    hs, _ = blacklist(HostState(), 100.0, (1.0, 10.0), 0.0)
    again, kill = blacklist(hs, 101.0, (1.0, 10.0), 0.0)
    assert not kill and again.cooldown_end == hs.cooldown_end and again.count == hs.count


def test_a_host_is_resurrected_when_its_cooldown_ends() -> None:
    hs, _ = blacklist(HostState(), 100.0, (1.0, 10.0), 0.0)
    assert is_excluded(hs, 101.9) and not is_resurrected(hs, 101.9)
    assert is_resurrected(hs, 102.0) and not is_excluded(hs, 102.0)
    assert whitelist(hs) == HostState(count=1)


# -- the barrier's decision table -------------------------------------------------------

def test_any_success_stops_the_job() -> None:
    d = decide_trip([(("a", 0), S), (("a", 1), F), (("b", 0), R)], 3, frozenset(), 0, None)
    assert (d.action, d.reason, d.blacklist) == ("stop", "success", ())


def test_all_failed_stops_the_job_without_blacklisting() -> None:
    d = decide_trip([(("a", 0), F), (("b", 0), F)], 2, frozenset(), 0, None)
    assert (d.action, d.reason, d.blacklist) == ("stop", "all_failed", ())


def test_failed_hosts_are_blacklisted_whole_and_the_job_resets() -> None:
    d = decide_trip([(("a", 0), F), (("a", 1), R), (("b", 0), R)], 3, frozenset(), 0, None)
    assert (d.action, d.reason, d.blacklist) == ("resume", "reset", ("a",))


def test_all_hosts_blacklisted_stops_the_job() -> None:
    d = decide_trip([(("a", 0), F), (("a", 1), R), (("b", 0), F), (("b", 1), R)], 4,
                    frozenset(), 0, None)
    assert (d.action, d.reason, d.blacklist) == ("stop", "all_blacklisted", ("a", "b"))


def test_the_reset_limit_counts_every_reset_and_is_checked_before_incrementing() -> None:
    states = [(("a", 0), R), (("b", 0), R)]
    assert decide_trip(states, 2, frozenset(), 0, 1).action == "resume"
    d = decide_trip(states, 2, frozenset(), 1, 1)
    assert (d.action, d.reason) == ("stop", "reset_limit")
    assert d.error_message == RESET_LIMIT_EXCEEDED_MESSAGE.format(1)
    assert decide_trip(states, 2, frozenset(), 1, 2).action == "resume"


# -- discovery --------------------------------------------------------------------------

def test_epoch_schedule_matches_rank_zeros_epoch_count_else_the_default() -> None:
    sched = [HostsAt(["a:2"], epoch=0), HostsAt(["a:2", "b:2"], epoch=1), HostsAt(["b:2"])]
    assert [scheduled_hosts(sched, Probe(1, 0.0, e)) for e in range(4)] == [
        ["a:2"], ["a:2", "b:2"], ["b:2"], ["b:2"]]
    assert epoch_hosts(sched, 1) == ["a:2", "b:2"] and epoch_hosts(sched, 7) == ["b:2"]


def test_time_and_poll_schedules_take_the_first_unexpired_entry() -> None:
    by_poll = [HostsAt(["a"], until_poll=10), HostsAt(["a", "b"], until_poll=30),
               HostsAt(["b"])]
    assert [scheduled_hosts(by_poll, Probe(p, 0.0, 0)) for p in (1, 9, 10, 29, 30)] == [
        ["a"], ["a"], ["a", "b"], ["a", "b"], ["b"]]
    by_time = [HostsAt(["a"], until_s=2.0), HostsAt(["b"])]
    assert scheduled_hosts(by_time, Probe(1, 1.99, 0)) == ["a"]
    assert scheduled_hosts(by_time, Probe(1, 2.0, 0)) == ["b"]


def test_a_schedule_entry_takes_at_most_one_key() -> None:
    with pytest.raises(ValueError):
        HostsAt(["a"], epoch=1, until_s=2.0)


def test_discovery_failures_hit_their_poll_only() -> None:
    src = DiscoverySource(Discovery(hosts=["a:1"], failures=[DiscoveryFailure(poll=2)]), 1,
                          random.Random(0))
    assert src.find_available_hosts_and_slots(Probe(1, 0.0, 0)) == {"a": 1}
    with pytest.raises(DiscoveryError):
        src.find_available_hosts_and_slots(Probe(2, 0.0, 0))
    assert src.find_available_hosts_and_slots(Probe(3, 0.0, 0)) == {"a": 1}


@given(st.integers(0, 2**32), st.integers(1, 3), st.integers(0, 2))
def test_random_discovery_stays_within_its_bounds(seed: int, lo: int, extra: int) -> None:
    spec = RandomHosts(hosts=list("abcdef"), min_hosts=lo, max_hosts=lo + extra)
    rng = random.Random(seed)
    cur = list(spec.hosts[: spec.max_hosts])
    for _ in range(30):
        nxt = random_step(cur, spec, rng)
        assert lo <= len(nxt) <= lo + extra and len(set(nxt)) == len(nxt)
        assert abs(len(nxt) - len(cur)) <= 1
        cur = nxt


def test_knobs_load_from_plain_data_with_nested_entries() -> None:
    k = load_knobs({"np": 4, "cooldown_range": [1, 2], "discovery": {
        "schedule": [{"epoch": 0, "hosts": ["a:2"]}, {"hosts": ["b"]}]},
        "exit_schedule": [{"epoch": 1, "batch": 0, "ranks": [0], "mode": "kill"}]})
    assert k.np == 4 and k.min_np is None and k.cooldown_range == (1.0, 2.0)
    assert k.discovery.schedule[0] == HostsAt(["a:2"], epoch=0)
    assert k.exit_schedule[0].mode == "kill" and k.elastic_timeout == 600.0


# -- host-update notifications on a worker ----------------------------------------------

A, RM = int(HostUpdateResult.added), int(HostUpdateResult.removed)


def test_only_strictly_newer_notifications_count_against_the_running_newest() -> None:
    assert newer_updates(5, []) == (5, HostUpdateResult.no_update)
    assert newer_updates(5, [(5, A)]) == (5, HostUpdateResult.no_update)
    # a same-second message is dropped even next to a newer one: skip_sync stays possible
    assert newer_updates(5, [(5, A), (6, RM)]) == (6, HostUpdateResult.removed)
    assert newer_updates(0, [(6, RM), (6, A)]) == (6, HostUpdateResult.removed)
    assert newer_updates(0, [(6, RM), (7, A)]) == (7, HostUpdateResult.mixed)
