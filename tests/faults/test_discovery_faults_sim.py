"""Discovery-source faults (discovery_add, discovery_remove, discovery_error,
discovery_hang) fire in the sim, are reported, and change what Horovod's discovery source
reports; protocols without a discovery source report them as not fired."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario
from tests.faults.util import run
from tests.protocols.horovod.util import Run, simulate_run

HOROVOD: dict[str, Any] = yaml.safe_load("""
name: discovery_faults
time_limit: 120
protocol:
  name: horovod
  knobs:
    np: 3
    min_np: 1
    max_np: 4
    min_start_hosts: 1
    discovery_period: 0.01
    batches_per_epoch: 10
    batches_per_commit: 1
    discovery_wait: 0
    elastic_timeout: 30
    new_host_order: sorted
    epochs: 3
    discovery:
      schedule:
      - hosts: ['h1:1', 'h2:1', 'h3:1']
cluster:
  hosts: [h1, h2, h3, h4]
  store_host: h1
workload: {steps: 30, step_time: 0.1, commit_every: 1, state_bytes: 4096}
""")
"""Three of four hosts discovered by a script; h4 runs its task service but is not listed.
Without faults the job trains three epochs at size 3, the first ending at about 2.5 s."""


def horovod(faults: list[dict[str, Any]]) -> Run:
    """The scenario above with ``faults``, in the sim."""
    raw = copy.deepcopy(HOROVOD)
    raw["faults"] = faults
    return simulate_run(parse_scenario(raw, "<test>"))


def report(r: Run, fid: str) -> tuple[bool, float | None, str]:
    """(fired, at, reason) of one fault."""
    (rep,) = [f for f in r.result.faults if f.id == fid]
    return rep.fired, rep.at, rep.reason


def phases(r: Run, fid: str) -> list[tuple[str, float]]:
    """(phase, time) of the fault's own trace events."""
    return [(e.get("phase"), e.t) for e in r.of("fault") if e.get("id") == fid]


def discovered(r: Run, after: float) -> list[tuple[str, list[str]]]:
    """(update, hosts) of each discovery change from ``after`` on."""
    return [(e.get("update"), e.get("hosts")) for e in r.of("hvd_discovery") if e.t >= after]


def test_without_discovery_faults_the_job_keeps_its_three_hosts() -> None:
    r = horovod([])
    assert discovered(r, 0.0) == [("added", ["h1:1", "h2:1", "h3:1"])]
    assert r.metrics.world_sizes == [3] and r.metrics.outcome == "completed"


def test_discovery_remove_drops_the_host_and_the_world_shrinks_skipping_the_sync() -> None:
    r = horovod([{"id": "rm", "type": "discovery_remove", "host": "h3", "at": 3.0}])
    assert report(r, "rm") == (True, 3.0, "")
    assert phases(r, "rm") == [("start", 3.0)]
    assert discovered(r, 3.0) == [("removed", ["h1:1", "h2:1"])]
    # A removal interrupts with skip_sync (upstream: only additions need a state sync).
    assert {e.get("skip_sync") for e in r.of("hvd_interrupt")} == {True}
    assert r.metrics.world_sizes == [3, 2]
    assert r.metrics.outcome == "completed" and not r.failed_checks


def test_discovery_add_lists_a_new_host_and_the_world_grows() -> None:
    r = horovod([{"id": "add", "type": "discovery_add", "host": "h4", "slots": 1, "at": 3.0}])
    assert report(r, "add") == (True, 3.0, "")
    assert discovered(r, 3.0) == [("added", ["h1:1", "h2:1", "h3:1", "h4:1"])]
    assert {e.get("skip_sync") for e in r.of("hvd_interrupt")} == {False}
    assert r.metrics.world_sizes == [3, 4]
    assert r.metrics.outcome == "completed" and not r.failed_checks


def test_a_discovery_add_that_heals_takes_the_host_away_again() -> None:
    r = horovod([{"id": "add", "type": "discovery_add", "host": "h4", "at": 2.6,
                  "duration": 2.5}])
    assert phases(r, "add") == [("start", 2.6), ("heal", 5.1)]
    assert discovered(r, 2.6) == [("added", ["h1:1", "h2:1", "h3:1", "h4:1"]),
                                  ("removed", ["h1:1", "h2:1", "h3:1"])]
    assert r.metrics.world_sizes == [3, 4, 3]


def test_discovery_errors_on_later_calls_are_ignored_by_the_driver() -> None:
    base = horovod([])
    r = horovod([{"id": "err", "type": "discovery_error", "at": 3.0, "duration": 0.5}])
    assert report(r, "err") == (True, 3.0, "")
    assert phases(r, "err") == [("start", 3.0), ("heal", 3.5)]
    errors = r.of("hvd_discovery_error")
    assert errors and all(3.0 <= e.t < 3.5 and e.get("first") is False for e in errors)
    # Upstream logs the failure and polls again: training is as without the fault.
    assert r.epoch_logs("epoch", "size") == base.epoch_logs("epoch", "size")
    assert r.metrics.outcome == "completed"


def test_a_discovery_error_on_the_first_call_ends_the_job() -> None:
    r = horovod([{"id": "err", "type": "discovery_error", "at": 0.0, "duration": 0.5}])
    assert report(r, "err")[0] is True
    (err,) = r.of("hvd_discovery_error")
    assert err.get("poll") == 1 and err.get("first") is True
    assert r.of("epoch_log") == []
    assert r.result.exit_codes["h1/main"] == 1 and r.metrics.outcome == "failed"


def test_a_discovery_hang_blocks_discovery_and_so_delays_the_notification() -> None:
    add = {"id": "add", "type": "discovery_add", "host": "h4", "at": 3.0}
    quick = horovod([add])
    hung = horovod([{"id": "hang", "type": "discovery_hang", "at": 2.9, "duration": 1.0}, add])
    assert phases(hung, "hang") == [("start", 2.9), ("heal", 3.9)]
    (notified_quick,) = quick.of("hvd_notify")
    (notified_hung,) = hung.of("hvd_notify")
    assert notified_quick.t < 3.1
    # The call that started during the hang returns only when it heals, then sees h4.
    assert notified_hung.t >= 3.9
    assert [e.t >= 3.9 for e in hung.of("hvd_discovery") if e.t > 0] == [True]
    assert hung.metrics.world_sizes == [3, 4]


def test_the_static_protocol_has_no_discovery_source(tmp_path: Path) -> None:
    faults = [{"id": "add", "type": "discovery_add", "host": "h3", "at": 1.0},
              {"id": "err", "type": "discovery_error", "at": 1.0, "duration": 1.0}]
    out = run(tmp_path, faults)
    for fid in ("add", "err"):
        assert out.faults[fid].fired is False
        assert out.faults[fid].reason == "protocol static has no discovery source"
    # The trace is the one record: each fault's only event says it was skipped, and why.
    assert [(e.data["id"], e.data["phase"]) for e in out.of("fault")] == [
        ("add", "skipped"), ("err", "skipped")]
    assert out.outcome == "completed"


def test_torchelastic_has_no_discovery_source() -> None:
    path = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "hot_spare.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["faults"] = [{"id": "rm", "type": "discovery_remove", "host": "h0", "at": 0.5}]
    _, _, result = simulate(parse_scenario(raw, str(path)), 0)
    (rep,) = result.faults
    assert rep.fired is False and rep.reason == "protocol torchelastic has no discovery source"


def test_the_overlay_applies_the_latest_change_of_a_host_and_heals_back() -> None:
    from elastic_sim.faults.discovery import DiscoveryFaults
    from elastic_sim.faults.model import DiscoveryAdd, DiscoveryRemove, DiscoveryScriptHang
    from elastic_sim.protocols.horovod.discovery import overlaid

    faults = DiscoveryFaults()
    add = DiscoveryAdd("a", 1.0, "h4", slots=2)
    rm = DiscoveryRemove("r", 2.0, "h4")
    hang = DiscoveryScriptHang("h", 2.0, duration=3.0)
    faults.start(add, 1.0)
    assert overlaid(["h1:1", "h2:1"], faults.overlay(1.5)) == ["h1:1", "h2:1", "h4:2"]
    faults.start(rm, 2.0)
    faults.start(hang, 2.0)
    now = faults.overlay(2.5)
    assert now.removed == ("h4",) and now.added == () and now.hang_s == 2.5
    assert overlaid(["h1:1", "h4:1"], now) == ["h1:1"]
    faults.heal(rm)
    faults.heal(hang)
    assert overlaid(["h1:1", "h4:1"], faults.overlay(6.0)) == ["h1:1", "h4:1"]


def test_a_search_can_draw_discovery_faults_and_every_one_is_reported() -> None:
    from elastic_sim.faults.schedule import FaultSpace, random_schedule
    from elastic_sim.scenario import with_faults

    kinds = ("discovery_add", "discovery_remove", "discovery_error", "discovery_hang")
    space = FaultSpace(hosts=("h1", "h2", "h3", "h4"), horizon=5.0, types=kinds,
                       max_faults=3, max_duration=2.0)
    drawn = [random_schedule(f"0/schedule/{i}", space) for i in range(12)]
    assert {f.type for s in drawn for f in s} == set(kinds)
    sc = parse_scenario(copy.deepcopy(HOROVOD), "<test>")
    for schedule in [s for s in drawn if s][:3]:
        _, _, result = simulate(with_faults(sc, list(schedule), seed=0, name="drawn"), 0)
        assert [r.id for r in result.faults] == [f.id for f in schedule]
        assert all(r.fired or r.reason for r in result.faults)
