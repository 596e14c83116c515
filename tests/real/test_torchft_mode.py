"""``--mode torchft`` end to end: upstream's torchft 0.2.0 (a real LighthouseServer, a
torchft.Manager with ProcessGroupGloo and the HTTP transport in every rank) runs the
replica crash of scenarios/torchft/replica_crash.yaml on real processes, with real faults,
and tells the same story as the model: the same memberships, a recovery within the
comparison's tolerance of the sim's, the heal from a max-step peer, and the healed
replica one batch behind (torchft issue #309)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from elastic_sim.pipeline import execute, simulate
from elastic_sim.spec import compile_spec

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None
                       or importlib.util.find_spec("torchft") is None,
                       reason="torchft mode needs torch and torchft (pip install "
                              "torchft==0.2.0)"),
]

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios/torchft/replica_crash.yaml"


def test_upstream_torchft_recovers_a_replica_crash_as_the_model_does(tmp_path: Path) -> None:
    spec = compile_spec(SCENARIO, mode="torchft")
    report = execute(spec, tmp_path / "run")
    assert report.exit_code == 0, [(c.name, c.violations[:1]) for c in report.checks
                                   if not c.ok]
    real = report.metrics
    assert real.outcome == "completed"
    assert real.world_sizes == [3, 2, 3]
    heals = [ev for ev in report.events if ev.kind == "ft_heal" and ev.host == "g1"]
    assert heals and heals[-1].get("src") in ("g0", "g2")
    position = {c.name: c for c in report.checks}["ft_data_position_agreement"]
    assert any("data position" in v.message and "g1 holds" in v.message
               for v in position.violations)  # upstream's #309, as the model says
    _, sim, _ = simulate(spec.scenario, spec.seed)
    (rec_real,) = [r for r in real.recoveries if r.id == "kill-g1-rank"]
    (rec_sim,) = [r for r in sim.recoveries if r.id == "kill-g1-rank"]
    assert rec_real.recovery_s is not None and rec_sim.recovery_s is not None
    assert abs(rec_real.recovery_s - rec_sim.recovery_s) <= 0.25 * rec_real.recovery_s
    assert [r.members for r in real.rounds] == [r.members for r in sim.rounds]
