"""Every fault type fires in the sim and has its effect on the static protocol (or, for the
effects the static protocol cannot observe, on a small probe process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.util import run

BASELINE_END: dict[str, float] = {}


def baseline(tmp: Path) -> float:
    """End time of the fault-free run."""
    if "end" not in BASELINE_END:
        out = run(tmp / "baseline", [])
        assert out.outcome == "completed" and not out.violations
        BASELINE_END["end"] = out.end
    return BASELINE_END["end"]


def test_crash_restart_brings_the_host_back_with_a_fresh_process(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "cr", "type": "crash_restart", "host": "h3", "at": 2.55,
                          "downtime": 3.0}])
    assert out.phases("cr") == [("start", 2.55), ("heal", 5.55)]
    starts = [e.t for e in out.of("proc_start", "h3")]
    assert starts == [0.0, 5.55]
    exits = [e.get("code") for e in out.of("proc_exit", "h3")]
    assert exits[0] == -9 and exits[-1] == 0
    # The fresh process joins a later round: the world grows back to four.
    sizes = out.report.metrics.world_sizes
    assert sizes[0] == 4 and 3 in sizes and sizes[-1] == 4
    assert out.outcome == "completed" and not out.violations


def test_straggler_slows_the_whole_synchronous_job_while_it_lasts(tmp_path: Path) -> None:
    base = baseline(tmp_path)
    out = run(tmp_path, [{"id": "s", "type": "straggler", "host": "h2", "at": 1.0,
                          "factor": 3.0, "duration": 3.0}])
    assert out.phases("s") == [("start", 1.0), ("heal", 4.0)]
    # 3 s at a third of the speed cost about 2 s of progress; allreduce waits for h2.
    assert 1.5 <= out.end - base <= 2.5
    assert out.outcome == "completed" and not out.violations


def test_preemption_sends_sigterm_and_the_survivors_carry_on(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "p", "type": "preempt", "host": "h3", "at": 2.55,
                          "grace": 5.0}])
    assert out.phases("p")[0] == ("start", 2.55)
    (ex,) = out.of("proc_exit", "h3")
    assert ex.get("code") == -15 and ex.t == pytest.approx(2.55)  # no TERM handler: dies
    assert out.report.metrics.world_sizes == [4, 3]
    assert out.outcome == "completed"


def test_scale_down_takes_the_host_out_and_scale_up_starts_a_new_agent(tmp_path: Path) -> None:
    hosts = ["h0", "h1", "h2", {"name": "h3", "start_at": 500}]
    out = run(tmp_path, [{"id": "up", "type": "scale_up", "host": "h3", "at": 2.0},
                         {"id": "down", "type": "scale_down", "host": "h1", "at": 4.05}],
              cluster={"hosts": hosts})
    assert out.faults["up"].fired and out.faults["down"].fired
    assert [e.t for e in out.of("proc_start", "h3")] == [2.0]
    assert out.of("proc_exit", "h1")[0].get("code") == -15
    sizes = out.report.metrics.world_sizes
    assert sizes[0] == 3 and 4 in sizes and sizes[-1] == 3
    assert out.end < 500  # the host's own late start is void once it scaled up


@pytest.mark.parametrize("fault", [
    {"type": "isolate", "host": "h3"},
    {"type": "bridge", "groups": [["h0"], ["h3"]], "bridge": ["h1", "h2"]},
    {"type": "one_way_partition", "src": ["h3"], "dst": ["h0", "h1", "h2"]},
    {"type": "partition", "groups": [["h0", "h1"], ["h2", "h3"]]},
], ids=["isolate", "bridge", "one_way", "symmetric"])
def test_a_partition_longer_than_the_group_timeout_times_out_the_training_collective(
    tmp_path: Path, fault: dict[str, object]
) -> None:
    out = run(tmp_path, [{"id": "cut", "at": 2.55, "duration": 40.0, **fault}])
    assert out.phases("cut")[0] == ("start", 2.55)
    restores = out.of("restore")
    assert restores and all(e.get("reason") == "CollectiveTimeout" for e in restores)
    assert min(e.t for e in restores) >= 2.55 + 30 - 0.2
    # The side without the store host finishes without the others.
    sizes = out.report.metrics.world_sizes
    assert sizes[0] == 4 and sizes[-1] < 4
    assert not out.violations


def test_a_short_partition_heals_and_the_blocked_collective_completes(tmp_path: Path) -> None:
    base = baseline(tmp_path)
    out = run(tmp_path, [{"id": "cut", "type": "isolate", "host": "h3", "at": 2.55,
                          "duration": 5.0}])
    assert out.phases("cut") == [("start", 2.55), ("heal", 7.55)]
    assert out.of("restore") == [] and out.report.metrics.world_sizes == [4]
    assert 4.0 <= out.end - base <= 5.5


def test_isolating_the_store_host_stalls_everyone_until_it_heals(tmp_path: Path) -> None:
    base = baseline(tmp_path)
    out = run(tmp_path, [{"id": "iso", "type": "isolate_store", "at": 0.5, "duration": 5.0}])
    fault = next(e for e in out.of("fault") if e.get("phase") == "start")
    assert fault.get("target") == [["h0"], ["h1", "h2", "h3"]]
    assert out.end - base >= 3.0 and out.outcome == "completed"


def test_link_delay_slows_every_collective_on_the_link(tmp_path: Path) -> None:
    base = baseline(tmp_path)
    out = run(tmp_path, [{"id": "slow", "type": "link", "a": "*", "b": "*", "delay": 0.02,
                          "at": 1.0, "duration": 3.0}])
    assert out.phases("slow") == [("start", 1.0), ("heal", 4.0)]
    assert out.end - base >= 0.5 and out.outcome == "completed"


def test_store_crash_ends_the_job_with_a_clear_error(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "sc", "type": "store_crash", "at": 2.0}])
    assert out.phases("sc") == [("start", 2.0)]
    failed = out.of("job_failed")
    assert failed and all("store" in e.get("error") for e in failed)
    assert out.of("proc_exit", "h0")[0].t >= 2.0  # the hosting process itself lived on
    assert out.outcome == "failed"


def test_store_freeze_holds_requests_until_it_thaws(tmp_path: Path) -> None:
    base = baseline(tmp_path)
    out = run(tmp_path, [{"id": "fz", "type": "store_freeze", "at": 0.5, "duration": 4.0}])
    assert out.phases("fz") == [("start", 0.5), ("heal", 4.5)]
    assert out.end - base >= 3.0 and out.outcome == "completed"


@pytest.mark.parametrize("mode,reason,after", [("fail", "CollectiveFailed", 0.0),
                                               ("hang", "CollectiveTimeout", 30.0)])
def test_a_collective_fault_fails_or_hangs_the_next_collective(
    tmp_path: Path, mode: str, reason: str, after: float
) -> None:
    out = run(tmp_path, [{"id": "c", "type": "collective", "host": "h2", "mode": mode,
                          "at": 2.0}])
    assert out.faults["c"].fired
    first = min(e.t for e in out.of("restore"))
    assert {e.get("reason") for e in out.of("restore")} <= {reason, "CollectiveFailed"}
    assert 2.0 + after <= first <= 2.0 + after + 1.0
    assert out.outcome == "completed" and not out.violations


def test_a_fault_on_a_host_that_is_already_down_is_reported_not_fired(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "c1", "type": "crash", "host": "h3", "at": 1.0},
                         {"id": "c2", "type": "straggler", "host": "h3", "at": 2.0,
                          "factor": 2, "duration": 1}])
    assert out.faults["c1"].fired and not out.faults["c2"].fired
    assert out.faults["c2"].reason == "host h3 already down"
