"""SIGKILL of the real-mode launcher itself (no chance to clean up), at start-up, mid-run,
during a recovery and while a partition is in force: within 10 s nothing of the run is
left: no process, network namespace (nor its nftables table), listening socket, temporary
file, or warden (counted as soon as all is gone, at 10 s at the latest). Marked ``real``:
one at a time with the other real tests (tests/conftest.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.bounds.launcher_kill import ROOT, kill_once

pytest.importorskip("torch", reason="real mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]

WORKER_CRASH = ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml"
PARTITION = ROOT / "scenarios" / "torchelastic" / "partition_heals.yaml"
TRIES = 5


def _needs_cut() -> str:
    from elastic_sim.real.faults import netns

    return netns.missing()


@pytest.mark.parametrize("phase", ["startup", "midrun", "recovery", "partition"])
def test_a_killed_launcher_leaves_nothing_behind(tmp_path: Path, phase: str) -> None:
    if phase == "partition" and _needs_cut():
        pytest.skip(f"partitions need a network cut: {_needs_cut()}")
    scenario = PARTITION if phase == "partition" else WORKER_CRASH
    results = [kill_once(scenario, phase, i, tmp_path) for i in range(TRIES)]
    reached = sum(r for r, _ in results)
    left = [lo for _, lo in results]
    stats = os.environ.get("ES_KILL_STATS")
    if stats:
        with open(stats, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"phase": phase, "tries": TRIES, "reached": reached,
                                 "left": [lo.total for lo in left],
                                 "detail": [lo.__dict__ for lo in left if lo.total]}) + "\n")
    assert reached == TRIES, f"the {phase} phase was reached {reached} of {TRIES} times"
    assert [lo.total for lo in left] == [0] * TRIES, [lo for lo in left if lo.total]


def test_two_runs_at_once_one_launcher_killed(tmp_path: Path) -> None:
    from tests.bounds.launcher_kill import left_after, reach, start

    runs = []
    for name in ("a", "b"):
        tmp = tmp_path / f"tmp-{name}"
        tmp.mkdir()
        runs.append((tmp_path / name, tmp, start(WORKER_CRASH, tmp_path / name, tmp)))
    (out_a, tmp_a, a), (out_b, tmp_b, b) = runs
    try:
        assert reach("midrun", 0, out_a, a)
        a.kill()
        a.wait()
        rc_b = b.wait(timeout=600)
    finally:
        for _, _, p in runs:
            p.kill()
            p.wait()
    summary = json.loads((out_b / "summary.json").read_text())
    assert rc_b in (0, 1) and summary["exit_code"] == rc_b
    assert summary["stopped"] is None and summary["metrics"]["outcome"] == "completed"
    assert left_after(out_a, tmp_a, a.pid).total == 0
    assert left_after(out_b, tmp_b, b.pid).total == 0
