"""A grid study prints its optimum (the setting of highest mean goodput) and plots goodput
against each varied setting; every study writes study.json, goodput.png and study.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.cli import main

GRID = """\
name: small_grid
protocol: {name: torchelastic, knobs: {max_restarts: 100, pg_timeout: 600, join_timeout: 600,
           share_store: false}}
cluster: {nodes: 4, gpus_per_node: 2}
workload: {step_time: 10, checkpoint_interval: 600, checkpoint_write: 20, resubmit: 120}
failures:
  mtbf_per_node: 21600
  causes:
    - {name: node, share: 1, effect: host, downtime: 300}
horizon_days: 1
replications: 40
method: composed
compare:
  checkpoint_interval: [60, 600, 6000]
  spares: [0, 1]
"""


def test_a_grid_prints_its_optimum_and_plots_each_varied_setting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "grid.yaml"
    spec.write_text(GRID, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["study", str(spec), "--out", str(out), "--no-cache"]) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "study.json").read_text())
    settings = data["settings"]
    assert len(settings) == 6
    best = max(settings, key=lambda s: s["goodput"]["mean"])
    assert data["optimum"]["label"] == best["label"]
    assert f"optimum: {best['label']}: " in printed
    # a 60 s interval writes 20 s in every 80 s: a quarter of the time, so it is never best
    assert "checkpoint_interval=60.0" not in best["label"]
    means = {s["label"]: s["goodput"]["mean"] for s in settings}
    assert means["checkpoint_interval=60.0, spares=0"] < 0.8
    png = (out / "goodput.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert "Goodput against" not in printed  # the plot's titles are in the picture only
    html = (out / "study.html").read_text()
    assert "data:image/png;base64," in html and best["label"] in html
