"""The static protocol's decisions are pure functions; they are specified here."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from elastic_sim.protocols.static.rendezvous import choose_members
from elastic_sim.protocols.static.training import (
    TrainState,
    apply_step,
    choose_root,
    gradients,
    initial_state,
)


@given(st.lists(st.text("abcdefgh", min_size=1, max_size=3), unique=True, min_size=1),
       st.integers(1, 10))
def test_members_are_the_first_arrivals_sorted(arrivals: list[str], max_hosts: int) -> None:
    members = choose_members(arrivals, max_hosts)
    assert members == sorted(members)
    assert set(members) == set(arrivals[:max_hosts])


@given(st.lists(st.sampled_from("abcde"), min_size=1, max_size=12), st.integers(1, 6))
def test_a_host_that_arrived_twice_is_one_member(arrivals: list[str], max_hosts: int
                                                 ) -> None:
    """A host whose new process joins a round its old one had joined: one member, the
    first max_hosts distinct hosts in arrival order."""
    members = choose_members(arrivals, max_hosts)
    assert len(members) == len(set(members)) == min(max_hosts, len(set(arrivals)))
    first = [h for i, h in enumerate(arrivals) if h not in arrivals[:i]][:max_hosts]
    assert members == sorted(first)
    assert choose_members(["h3", "h3", "h1", "h0", "h2"], 3) == ["h0", "h1", "h3"]


@given(st.lists(st.integers(0, 50).map(float), min_size=1, max_size=16))
def test_root_has_the_most_progress_lowest_rank_on_ties(steps: list[float]) -> None:
    root = choose_root(steps)
    assert steps[root] == max(steps)
    assert all(s < steps[root] for s in steps[:root])


def test_hosts_start_from_different_parameters() -> None:
    a, b = initial_state("h0", 0, 8), initial_state("h1", 0, 8)
    assert a.params != b.params and a.digest() != b.digest()
    assert initial_state("h0", 1, 8) != a
    assert initial_state("h0", 0, 8) == a


@given(st.integers(0, 1000), st.integers(1, 64))
def test_state_round_trips_through_the_broadcast_blob(step: int, size: int) -> None:
    s = TrainState(step, tuple(x / 7 for x in range(4)))
    assert TrainState.from_bytes(s.to_bytes(size), 4) == s
    assert len(s.to_bytes(size)) == max(size, len(s.header()))


def test_members_with_the_same_state_and_sum_stay_identical() -> None:
    s = initial_state("h0", 0, 8)
    summed = [sum(v) for v in zip(*(gradients(0, r, 8) for r in range(3)), strict=True)]
    assert all(float(g).is_integer() for g in summed)
    assert apply_step(s, summed, 3) == apply_step(s, summed, 3)
    assert apply_step(s, summed, 3).step == 1
    assert apply_step(s, summed, 3).params != s.params


def test_gradient_rows_and_remembered_steps_equal_the_formulas() -> None:
    # the rows are cached by (7 step + 3 rank) mod 5 and updates are remembered: both
    # must give exactly what the formulas give, for any step, rank, size and world
    for step in range(40):
        for rank in range(9):
            for n in (0, 1, 4, 9, 33):
                want = [float((step * 7 + rank * 3 + i) % 5 - 2) for i in range(n)]
                assert gradients(step, rank, n) == want
    s = TrainState(3, (0.5, 0.25, 0.125))
    for world in (1, 2, 3, 7):
        summed = [float(v) for v in (world, -2 * world, 1)]
        for _ in range(2):  # computed, then remembered
            got = apply_step(s, summed, world)
            assert got.step == 4
            assert got.params == tuple(p - (1 / 16) * g / world
                                       for p, g in zip(s.params, summed, strict=True))
    other = apply_step(TrainState(3, (0.5, 0.25, 0.0625)), [1.0, 1.0, 1.0], 3)
    assert other.params != apply_step(s, [1.0, 1.0, 1.0], 3).params
    assert apply_step(s, [1.0, 1.0, 1.0], 2).params != apply_step(s, [1.0, 1.0, 1.0], 3).params
    got = gradients(5, 1, 4)
    got.append(9.0)  # a caller's list is its own: the remembered row is unchanged
    assert gradients(5, 1, 4) == [float((5 * 7 + 3 + i) % 5 - 2) for i in range(4)]
