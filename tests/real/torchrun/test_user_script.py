"""A user's own DDP script under ``--mode torchrun``, as a new user runs it: it prints
(a megabyte before it starts, then a line per step), calls :mod:`elastic_sim.probe`, and a
host crashes mid-training. The run measures it as it measures the bundled worker: recovery,
lost steps, goodput, every check judged; the workers' output is in the run directory."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

from elastic_sim.pipeline import execute
from elastic_sim.real.torchrun.convert import NOT_JUDGED
from elastic_sim.reports.metrics import goodput
from elastic_sim.spec import compile_spec
from tests.real.torchrun.test_torchrun_mode import left_with

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torchrun mode needs torch"),
]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "ddp_train.py"
MEGABYTE = 1 << 20

NOISY = f"""
import runpy, sys
sys.stdout.write("." * {MEGABYTE} + "\\n")  # a megabyte on stdout before anything else
sys.argv[0] = {str(EXAMPLE)!r}
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_printing_ddp_script_is_measured_like_the_bundled_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = f"ES_TEST_TAG={uuid.uuid4().hex}"
    monkeypatch.setenv(*tag.split("="))
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    script = tmp_path / "noisy_train.py"
    script.write_text(NOISY)
    out = tmp_path / "run"
    report = execute(compile_spec(ROOT / "scenarios/torchelastic/ddp_train.yaml", seed=0,
                                  mode="torchrun", script=(str(script), "--steps", "150")),
                     out)

    m = report.metrics
    checks = {c.name: c for c in report.checks}
    seen = (f"{m.outcome} {m.errors} rounds {m.world_sizes} recoveries {m.recoveries} "
            + "; ".join(f"{c.name}: {c.status} {c.not_judged} {[v.message for v in c.violations]}"
                        for c in report.checks if not c.ok or c.not_judged))
    assert m.outcome == "completed", seen
    assert (m.steps_total, m.steps_done) == (150, 150), seen  # the script's --steps
    assert m.world_sizes == [3, 2], seen
    (rec,) = m.recoveries
    assert None not in (rec.recovery_s, rec.detected_at, rec.synced_at, rec.first_step_at), seen
    assert 0 <= rec.lost_steps <= 10, seen  # a checkpoint every 10 steps (0: right after one)
    assert 0 < goodput(report.events, m.rounds, m.end_time, m.stalls, m.rollbacks).ratio < 1
    # Nothing is n/a for being a script: only what upstream's own events cannot show.
    assert {n for n, c in checks.items() if c.not_judged} <= set(NOT_JUDGED), seen
    for name in ("collective_sequence", "state_agreement", "committed_progress",
                 "progress_after_faults", "clean_shutdown"):
        assert checks[name].checked > 0 and checks[name].ok, (name, seen)
    # Every worker's output, where torchrun's --log-dir puts it: the megabyte and the
    # per-step lines of the round that completed.
    outputs = sorted(out.glob("torchrun/logs/*/*/attempt_*/*/stdout.log"))
    assert len(outputs) >= 3
    assert all(p.stat().st_size > MEGABYTE for p in outputs)
    assert any("of 2: step 150 loss" in p.read_text() for p in outputs)
    assert list(system_tmp.iterdir()) == []  # no torchelastic_* folder outside the run
    assert left_with(tag) == []
