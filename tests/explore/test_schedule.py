"""Schedules are drawn from one generator, repeatably, within their space, and shrink."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_sim.faults.model import CrashHost, HangHost, Partition
from elastic_sim.faults.schedule import (
    FaultSpace,
    random_schedule,
    schedule_size,
    shrink_candidates,
)
from elastic_sim.faults.strategies import fault_schedules

SPACE = FaultSpace(hosts=("h0", "h1", "h2", "h3"), horizon=10.0, max_faults=3,
                   max_duration=5.0, spare=("h0",))


def test_the_same_stream_draws_the_same_schedule() -> None:
    assert random_schedule("s/1", SPACE) == random_schedule("s/1", SPACE)
    assert len({random_schedule(f"s/{i}", SPACE) for i in range(30)}) > 20


@settings(max_examples=60, deadline=None)
@given(fault_schedules(SPACE))
def test_drawn_schedules_stay_within_their_space(schedule: tuple[object, ...]) -> None:
    assert len(schedule) <= SPACE.max_faults
    ats = [f.at for f in schedule]  # type: ignore[attr-defined]
    assert ats == sorted(ats) and all(0 <= t <= SPACE.horizon for t in ats)
    for f in schedule:
        if isinstance(f, CrashHost):
            assert f.host != "h0"  # spare
        if isinstance(f, HangHost | Partition):
            assert 0 < f.duration <= SPACE.max_duration
        if isinstance(f, Partition):
            assert sorted(h for g in f.groups for h in g) == ["h0", "h1", "h2", "h3"]
            assert all(f.groups)


@given(st.integers(0, 10_000))
def test_every_shrink_candidate_is_simpler(i: int) -> None:
    schedule = random_schedule(f"shrink/{i}", SPACE)
    for cand in shrink_candidates(schedule):
        assert schedule_size(cand) < schedule_size(schedule)


def test_a_one_fault_schedule_shrinks_first_to_none() -> None:
    crash = CrashHost("c", 2.5, "h1")
    cands = shrink_candidates((crash,))
    assert cands[0] == ()
    assert CrashHost("c", 0.0, "h1") in [c[0] for c in cands[1:]]
