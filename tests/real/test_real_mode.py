"""Real mode runs the same scenario as the sim, with real processes, a real TCPStore and
real Gloo groups, reaches the same membership sequence, and leaves no process behind,
also when interrupted with Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from tests.faults.util import first_full
from tests.procs import membership, processes_mentioning, reaped

ROOT = Path(__file__).resolve().parents[2]

torch = pytest.importorskip("torch", reason="real mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]




def _from_full(rounds: list[Any]) -> list[Any]:
    """Each round's members and ranks (not its number), from the first with four hosts."""
    full = next((i for i, r in enumerate(rounds) if len(r[1]) == 4), 0)
    return [r[1:] for r in rounds[full:]]


def run(tmp_path: Path, mode: str) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path / mode
    rc = main(["run", str(ROOT / "scenarios" / "scale_down.yaml"), "--mode", mode,
               "--out", str(out), "--quiet"])
    return rc, json.loads((out / "summary.json").read_text()), out


def test_scale_down_real_matches_the_sim_and_leaves_nothing_behind(tmp_path: Path) -> None:
    rc_sim, sim, _ = run(tmp_path, "sim")
    rc_real, real, out = run(tmp_path, "real")
    assert rc_sim == 0
    failed = [c for c in real["checks"] if not c["ok"]]
    unmet = [e for e in real["expectations"] if not e["ok"]]
    assert (rc_real, failed, unmet) == (0, [], [])
    # from the first round of all four hosts on: a loaded machine can start a real host
    # seconds late and the first round close without it (its last call over)
    assert _from_full(membership(real)) == _from_full(membership(sim))
    assert len(membership(sim)) == 2 and len(_from_full(membership(real))) == 2
    assert first_full(real["metrics"]["world_sizes"]) == [4, 3]
    assert real["exit_codes"]["h3/main"] == -9
    # Recovery in real mode: detection (Gloo notices a dead peer within ~0.2 s), the 1 s
    # last call, a new Gloo group and the sync.
    (rec,) = real["metrics"]["recoveries"]
    assert 1.0 <= rec["recovery_s"] <= 5.0
    kinds = {json.loads(line)["kind"] for line in (out / "trace.jsonl").open()}
    assert {"coll_fail", "restore", "rdzv_done", "sync", "commit", "fault"} <= kinds
    assert processes_mentioning(str(out)) == []


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    out = tmp_path / "interrupted"
    with reaped(subprocess.Popen(
        [sys.executable, "-m", "elastic_sim.cli", "run", "scenarios/scale_down.yaml",
         "--mode", "real", "--out", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )) as proc:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(processes_mentioning(str(out))) < 5:
            time.sleep(0.2)  # wait until the launcher and the 4 host processes run
        assert len(processes_mentioning(str(out))) >= 5, "the run did not start"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    time.sleep(0.5)
    assert processes_mentioning(str(out)) == []
    assert not (out / "trace.jsonl").exists(), "an interrupted run leaves no half trace"
    assert not (out / "trace.jsonl.part").exists()
