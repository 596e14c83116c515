"""Differential tests of the Lighthouse: torchft 0.2.0's own ``LighthouseServer`` on
loopback and the model's ``LighthouseCore`` run the same Hypothesis-generated schedules
(joins at various steps, shrink_only, heartbeats that stop, late joiners, previous quorums
returning); after every operation both show the same quorum id and the same reason for
the next quorum, and every quorum request is answered with the same quorum (id, members,
their steps) or by neither (:mod:`.lighthouse_side`).

Counts: ``DIFF_FT_ORDER`` order-only schedules (default 1,600, run 16 at a time on 16
servers) and ``DIFF_FT_TIMED`` timed ones (default 64, 8 at a time); about a minute and a
half on two cores (with the Manager's, two minutes or less). A mutant of the fast-quorum
rule (one previous member may be missing) is caught by the same differential.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from elastic_sim.protocols.torchft import lighthouse_rules
from elastic_sim.protocols.torchft.quorum import Quorum
from tests.protocols.torchft import lighthouse_side
from tests.protocols.torchft.lighthouse_side import Op, Schedule, differ

lighthouse_side.skip_without_torchft()

pytestmark = pytest.mark.slow

ORDER = int(os.environ.get("DIFF_FT_ORDER", "1600"))
TIMED = int(os.environ.get("DIFF_FT_TIMED", "64"))
BATCH, TIMED_BATCH = 16, 8
REPLICAS = ("r0", "r1", "r10", "r2", "rb")
"""Replica ids whose string order is not their numeric one (upstream sorts strings)."""
COUNTS: dict[str, int] = {}


def _ops(pool: tuple[str, ...]) -> st.SearchStrategy[Op]:
    ask = st.builds(Op, st.just("ask"), st.sampled_from(pool), st.integers(0, 3),
                    st.integers(0, 4).map(lambda x: x == 0))
    beat = st.builds(Op, st.just("hb"), st.sampled_from(pool))
    return st.one_of(ask, ask, ask, beat)


@st.composite
def schedules(draw: st.DrawFn, timed: bool) -> Schedule:
    """A schedule over 2 to 5 replicas: some heartbeat first, then requests and
    heartbeats; timed, in 2 or 3 rounds of heartbeats, requests and a wait (1 to 5 units,
    past the join timeout or a heartbeat's expiry or not), so that the clock issues
    quorums (a late joiner, heartbeats that stop)."""
    pool = REPLICAS[:draw(st.integers(2, len(REPLICAS)))]
    first = draw(st.lists(st.sampled_from(pool), unique=True))
    ops = [Op("hb", r) for r in first]
    if not timed:
        ops += draw(st.lists(_ops(pool), min_size=1, max_size=14))
        return Schedule(draw(st.integers(1, len(pool))), tuple(ops))
    for _ in range(draw(st.integers(2, 3))):
        ops += [Op("hb", r) for r in draw(st.lists(st.sampled_from(pool), unique=True,
                                                   max_size=3))]
        ops += draw(st.lists(_ops(pool), max_size=3))
        ops.append(Op("wait", units=draw(st.integers(1, 5))))
    return Schedule(draw(st.integers(1, 2)), tuple(ops), draw(st.integers(2, 5)),
                    draw(st.one_of(st.none(), st.integers(1, 4), st.integers(1, 4))))


TIMED_ATTEMPTS = 3
"""Tries of a timed schedule that disagrees: its margins are 0.2 s units against the real
server's clock, which a loaded CI machine (two cores, a test on each) misses now and then;
a wrong rule disagrees every time."""


def _all_agree(batch: list[Schedule], workers: int) -> None:
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(
            lambda s: differ(s, attempts=TIMED_ATTEMPTS if s.timed else 2), batch))
    for s, found in zip(batch, results, strict=True):
        key = "timed schedules" if s.timed else "order schedules"
        COUNTS[key] = COUNTS.get(key, 0) + 1
        COUNTS["operations"] = COUNTS.get("operations", 0) + len(s.ops)
        COUNTS["quorums issued by the clock"] = (COUNTS.get("quorums issued by the clock", 0)
                                                 + lighthouse_side.by_clock(s))
        assert found == [], f"{s}:\n  " + "\n  ".join(found)


@settings(max_examples=max(1, ORDER // BATCH), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(schedules(timed=False), min_size=BATCH, max_size=BATCH))
def test_the_model_issues_the_quorums_upstream_issues_in_any_order_of_requests(
        batch: list[Schedule]) -> None:
    _all_agree(batch, BATCH)


@pytest.mark.xdist_group("real")  # timed: beside the real tests, not a busy worker's CPU
@settings(max_examples=max(1, TIMED // TIMED_BATCH), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(schedules(timed=True), min_size=TIMED_BATCH, max_size=TIMED_BATCH))
def test_the_model_expires_heartbeats_and_waits_for_stragglers_as_upstream_does(
        batch: list[Schedule]) -> None:
    _all_agree(batch, TIMED_BATCH)


def test_hand_written_schedules_agree() -> None:
    """The cases the issue names, written out: joins at different steps, shrink_only
    keeping a newcomer out, a previous quorum returning (fast, same id), heartbeats that
    stop, a late joiner after the join timeout."""
    ask = lambda r, s=0, sh=False: Op("ask", r, s, sh)  # noqa: E731
    hb, wait = (lambda r: Op("hb", r)), (lambda n: Op("wait", units=n))
    cases = [
        Schedule(2, (hb("a"), hb("b"), hb("c"), ask("a", 1), ask("b", 2), ask("c", 2),
                     ask("a", 3), ask("b", 3), ask("c", 3, True), ask("d"), ask("a", 4))),
        Schedule(1, (ask("a"), ask("b"), ask("b", 1), ask("a", 1), ask("c", 0, True),
                     ask("a", 2), ask("b", 2))),
        Schedule(2, (hb("a"), hb("b"), hb("c"), ask("a", 1), ask("b", 1), wait(1), hb("a"),
                     wait(1), hb("a"), wait(3), ask("a", 2), wait(1), ask("c")),
                 heartbeat_units=3, join_units=2),
        Schedule(2, (hb("a"), hb("b"), hb("c"), ask("a"), ask("b"), wait(3), ask("c")),
                 heartbeat_units=5, join_units=1),
    ]
    _all_agree(cases, len(cases))


def _fast_with_one_missing(prev: Quorum, ready: object) -> bool:
    """A mutant: a quorum is fast with one previous member missing (off by one)."""
    back = sum(rid in ready for rid in prev.replica_ids)  # type: ignore[operator]
    return back >= len(prev.replica_ids) - 1


def test_a_mutant_fast_quorum_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lighthouse_rules, "fast_quorum", _fast_with_one_missing)
    found = find(schedules(timed=False), lambda s: bool(differ(s, attempts=1)),
                 settings=settings(max_examples=300, deadline=None, database=None,
                                   derandomize=True, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    assert differ(found, attempts=1), found


def test_report_counts(record_property: pytest.RecordProperty) -> None:
    """The counts of this run (``pytest -s`` prints them)."""
    for key, n in sorted(COUNTS.items()):
        record_property(key, n)
        print(f"torchft lighthouse differential: {n} {key}, 0 disagreements")
