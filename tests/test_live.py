"""Live progress: one status line of hosts ready, rounds formed, steps and faults fired,
updated while a run goes on (real mode reads the processes' traces as they are written)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from elastic_sim.live import LiveStatus
from elastic_sim.pipeline import execute
from elastic_sim.scenario import load_scenario
from elastic_sim.spec import compile_spec
from elastic_sim.trace import TraceEvent
from tests.conftest import SCENARIOS


def test_status_line_follows_the_events() -> None:
    shown: list[str] = []
    live = LiveStatus(3, shown.append)
    for ev in [TraceEvent(0.0, "h0", "h0/main", "proc_start", {}),
               TraceEvent(0.0, "h1", "h1/main", "proc_start", {}),
               TraceEvent(0.1, "h1", "h1/main", "rdzv_join", {"round": 0}),  # no change
               TraceEvent(0.2, "h0", "h0/main", "rdzv_done", {"round": 0, "world_size": 2}),
               TraceEvent(0.3, "h0", "h0/main", "step", {"round": 0, "step": 1}),
               TraceEvent(0.3, "h1", "h1/main", "step", {"round": 0, "step": 1}),  # same
               TraceEvent(2.5, "*", "injector", "fault", {"id": "f0-crash", "phase": "start"}),
               TraceEvent(4.0, "*", "injector", "fault", {"id": "f0-crash", "phase": "heal"})]:
        live(ev)
    assert shown == [
        "hosts 1/3 ready",
        "hosts 2/3 ready",
        "hosts 2/3 ready; round 0 formed (2 members)",
        "hosts 2/3 ready; round 0 formed (2 members); step 1",
        "hosts 2/3 ready; round 0 formed (2 members); step 1; faults fired: f0-crash at 2.5 s",
    ]


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="real mode needs torch")
def test_a_real_run_reports_progress_while_it_runs(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "scale_down.yaml")
    shown: list[str] = []
    report = execute(compile_spec(sc, seed=0, mode="real"), tmp_path, progress=shown.append)
    assert report.passed
    assert shown[0].startswith("starting real processes")
    assert any(s.startswith("hosts 4/4 ready") for s in shown)
    ready = [int(s.split("/")[0].split()[-1]) for s in shown[1:]]
    assert ready == sorted(ready)  # never goes back
    assert any("faults fired: crash-h3 at" in s for s in shown)
    assert any("round 1 formed (3 members)" in s for s in shown)
    steps = [int(s.split("step ")[1].split(";")[0]) for s in shown if "; step " in s]
    assert steps == sorted(steps) and len(steps) > 10  # it moved while the run went on
