"""Differential tests of the Manager server: torchft 0.2.0's own ``ManagerServer`` per
replica group, behind a real ``LighthouseServer``, answer their ranks' ``_quorum`` calls
exactly as the model's ``compute_quorum_results`` does (quorum id, replica rank and world
size, max step and who is at it, the primary's store per rank, heal, the recovery source
and destinations, commit failures, replica ids), for replica groups at different steps,
with and without ``init_sync``, several ranks each, over successive quorums; their
should_commit decisions and checkpoint metadata answers agree too (:mod:`.manager_side`).

Counts: ``DIFF_FT_MANAGER`` schedules (default 600, 8 at a time), about half a minute on
two cores. A mutant of the heal rule (the source one place further) is caught.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from elastic_sim.protocols.torchft import results
from tests.protocols.torchft import lighthouse_side
from tests.protocols.torchft.manager_side import Group, ManagerSchedule, differ

lighthouse_side.skip_without_torchft()

pytestmark = pytest.mark.slow

SCHEDULES = int(os.environ.get("DIFF_FT_MANAGER", "600"))
BATCH = 8
IDS = ("g0", "g1", "g10", "g2", "replica_b")
COUNTS: dict[str, int] = {}


@st.composite
def schedules(draw: st.DrawFn) -> ManagerSchedule:
    """2 to 4 replica groups of 1 to 3 ranks through 1 to 3 quorums, at steps 0 to 3
    (ties likely), some with should_commit failures, with or without init_sync."""
    rounds = draw(st.integers(1, 3))
    ids = draw(st.lists(st.sampled_from(IDS), min_size=2, max_size=4, unique=True))
    groups = []
    for rid in ids:
        ranks = draw(st.integers(1, 3))
        per_round = st.lists
        groups.append(Group(
            rid, ranks,
            tuple(draw(per_round(st.integers(0, 3), min_size=rounds, max_size=rounds))),
            tuple(draw(per_round(st.sampled_from((0, 0, 0, 1, 2)), min_size=rounds,
                                 max_size=rounds))),
            tuple(draw(per_round(st.booleans(), min_size=rounds, max_size=rounds))),
            tuple(tuple(draw(st.lists(st.sampled_from((True, True, True, False)),
                                      min_size=ranks, max_size=ranks)))
                  for _ in range(rounds))))
    return ManagerSchedule(tuple(groups), rounds)


@settings(max_examples=max(1, SCHEDULES // BATCH), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(schedules(), min_size=BATCH, max_size=BATCH))
def test_every_rank_gets_the_quorum_results_upstream_computes(
        batch: list[ManagerSchedule]) -> None:
    with ThreadPoolExecutor(BATCH) as pool:
        found = list(pool.map(differ, batch))
    for s, diffs in zip(batch, found, strict=True):
        COUNTS["schedules"] = COUNTS.get("schedules", 0) + 1
        COUNTS["rank results"] = COUNTS.get("rank results", 0) + s.rounds * sum(
            g.ranks for g in s.groups)
        assert diffs == [], f"{s}:\n  " + "\n  ".join(diffs)


def test_groups_behind_heal_from_sources_spread_over_the_up_to_date_ones() -> None:
    """Written out: two up-to-date groups, two behind, three ranks each (RFC #343's
    per-rank spread), then every group at max step 0 with init_sync."""
    vote = ((True, True, True),)
    behind = ManagerSchedule((Group("g0", 3, (5,), (0,), (True,), vote),
                              Group("g1", 3, (5,), (0,), (True,), vote),
                              Group("g2", 3, (0,), (0,), (True,), vote),
                              Group("g3", 3, (4,), (1,), (False,), vote)), 1)
    start = ManagerSchedule(tuple(Group(f"g{i}", 2, (0,), (0,), (True,), ((True, False),))
                                  for i in range(3)), 1)
    assert differ(behind) == []
    assert differ(start) == []


def _one_further(i: int, group_rank: int, up_to_date: list[int]) -> int:
    """A mutant: the heal source one place further than upstream's (off by one)."""
    return up_to_date[(i + group_rank + 1) % len(up_to_date)]


def test_a_mutant_heal_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "heal_source", _one_further)
    found = find(schedules(), lambda s: bool(differ(s)),
                 settings=settings(max_examples=200, deadline=None, database=None,
                                   derandomize=True, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    assert differ(found), found


def test_report_counts(record_property: pytest.RecordProperty) -> None:
    """The counts of this run (``pytest -s`` prints them)."""
    for key, n in sorted(COUNTS.items()):
        record_property(key, n)
        print(f"torchft manager differential: {n} {key}, 0 disagreements")
