"""Metrics for reports: world size over time, round durations, goodput, restarts."""

from __future__ import annotations

import pytest

from elastic_sim.reports.metrics import (
    goodput,
    lost_samples,
    recoveries_of,
    restarts_of,
    round_ends,
    rounds_of,
    world_size_series,
)
from elastic_sim.trace import TraceEvent
from tests.reports.synth import static_run


def test_world_size_series_goes_from_4_to_3_when_the_new_round_forms() -> None:
    rounds = rounds_of(static_run())
    assert world_size_series(rounds) == [(0.003, 4), (3.708, 3)]


def test_a_round_ends_when_its_first_member_leaves_for_the_next_one() -> None:
    events = static_run()
    rounds = rounds_of(events)
    assert round_ends(events, rounds, events[-1].t) == {0: 2.708, 1: 7.713}


def test_goodput_counts_each_kept_step_once_and_rolled_back_steps_as_waste() -> None:
    events = static_run()  # 60 steps of 0.1 s; steps 21..25 are lost and redone
    g = goodput(events, rounds_of(events), events[-1].t)
    assert g.useful_s == pytest.approx(6.0)
    assert g.wasted_s == pytest.approx(0.5)
    assert g.wall_s == pytest.approx(7.713)
    assert g.ratio == pytest.approx(6.0 / 7.713)


def test_goodput_counts_time_waiting_for_a_peer_as_stalled_not_useful() -> None:
    events = static_run(crash_host=None, steps=10)
    slow = [ev if not (ev.kind == "step" and ev.get("step") >= 5)
            else TraceEvent(ev.t + 2.0, ev.host, ev.proc, ev.kind, ev.data) for ev in events]
    g = goodput(slow, rounds_of(slow), slow[-1].t)
    assert g.useful_s == pytest.approx(1.0)
    assert g.stalled_s == pytest.approx(2.0)


def test_restarts_count_re_rendezvous_and_rollbacks() -> None:
    events = static_run()
    r = restarts_of(events, rounds_of(events))
    assert (r.rendezvous, r.rollbacks, r.processes) == (1, 3, 0)


def test_lost_samples_scale_lost_steps_by_the_world_the_fault_hit() -> None:
    events = static_run()
    rounds = rounds_of(events)
    (rec,), _, _ = recoveries_of(events, rounds)
    assert rec.lost_steps == 5
    assert lost_samples(rec, rounds) == 20
    assert lost_samples(rec, rounds, batch_size=32) == 640


def test_a_campaign_counts_as_unrecovered_only_faults_that_needed_a_recovery() -> None:
    from pathlib import Path

    from elastic_sim.reports.campaign import Campaign, RunRecord
    from tests.reports.synth import hung_run, summary_for

    def record(events: list[TraceEvent], steps: int) -> RunRecord:
        recs = summary_for(events, steps=steps)["metrics"]["recoveries"]
        return RunRecord(Path("."), "r", 0, "pass", "completed", recs, [], [])

    failed = static_run()  # the crash, seen and recovered; then drop its recovery
    seen = record(failed, 60)
    seen.recoveries[0] = seen.recoveries[0] | {"recovery_s": None}
    c = Campaign([record(hung_run(), 10), seen])
    assert c.unrecovered() == {"crash": 1}  # the hang needed no recovery: it only stalled
