"""Real mode under the wall-clock guard: the run is ended with its own outcome, its trace
kept, and nothing of it is left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.cli import main
from tests.procs import processes_mentioning

pytest.importorskip("torch", reason="real mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_wall_limit_ends_a_real_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(["run", str(ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml"),
               "--mode", "real", "--out", str(out), "--no-report", "-q", "--wall-limit", "3"])
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 1 and summary["verdict"] == "stopped" and summary["stopped"] == "wall_limit"
    kinds = [json.loads(line)["kind"] for line in (out / "trace.jsonl").read_text().splitlines()]
    assert "run_stopped" in kinds and kinds[-1] == "run_end"
    assert summary["metrics"]["end_time"] < 300  # ended at the guard, not the time limit
    assert processes_mentioning(str(out)) == []
