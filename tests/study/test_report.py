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
    html = (out / "study.html").read_text()
    assert "data:image/png;base64," in html and best["label"] in html


@pytest.mark.slow
def test_llama3_54d_runs_whole_from_a_cold_cache_within_its_budget(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """studies/llama3_54d.yaml (2,048 nodes x 8 GPUs, 54 days, 200 replications) from a
    cold cache in one process: the acceptance asks under 10 minutes on the 2-core host;
    this asserts under 300 CPU s (about 40 measured). Its failures per run are the
    published 419 within 3 %, and the published figure is printed beside its own."""
    import time

    from tests.conftest import ROOT

    started = time.process_time()
    out = tmp_path / "out"
    rc = main(["study", str(ROOT / "studies" / "llama3_54d.yaml"), "--out", str(out),
               "--no-cache"])
    cpu = time.process_time() - started
    printed = capsys.readouterr().out
    assert rc == 0
    assert cpu < 300.0, cpu
    data = json.loads((out / "study.json").read_text())
    (setting,) = data["settings"]
    assert data["method"] == "composed"
    assert setting["failures_per_run"]["mean"] == pytest.approx(419, rel=0.03)
    assert "published: > 90 % effective training time; this study: " in printed
    assert f"{100 * setting['goodput']['mean']:.1f} % [" in printed
    assert sorted(p.name for p in out.iterdir()) == ["goodput.png", "study.html", "study.json"]
