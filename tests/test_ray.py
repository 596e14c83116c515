"""Campaigns on Ray (``--ray``): a local Ray finds what local worker processes find, for
the same search seed and budget (also with knob variation, and when a Ray worker process
dies mid-campaign), a sweep's and a comparison's runs come back with their files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from tests.conftest import SCENARIOS
from tests.ray_entries import MARKER_ENV, SPARE_ENV

pytest.importorskip("ray", reason="Ray is an optional extra: elastic-sim[ray]")
pytestmark = pytest.mark.slow


def _findings(out: Path) -> list[dict[str, Any]]:
    """What explore found, less where it wrote it and when (how many runs shrinking took
    is included: a shrink is one task that tries one candidate at a time, whoever runs
    it)."""
    found = json.loads((out / "explore.json").read_text())["violations"]
    return [{k: v for k, v in f.items() if k not in ("reproducer", "run_dir", "found_s")}
            for f in found]


def test_explore_on_a_local_ray_finds_what_two_workers_find(tmp_path: Path) -> None:
    common = [str(SCENARIOS / "broken_skip_sync.yaml"), "--budget", "12", "--seed", "1"]
    assert main(["explore", *common, "--workers", "2", "--out", str(tmp_path / "w2")]) == 1
    assert main(["explore", *common, "--ray", "--out", str(tmp_path / "ray")]) == 1
    local, on_ray = _findings(tmp_path / "w2"), _findings(tmp_path / "ray")
    assert local and on_ray == local  # same signatures, shrunk schedules and trace digests
    assert {f["check"] for f in local} >= {"state_agreement"}
    assert all((tmp_path / "ray" / Path(f["reproducer"]).name).is_file()
               for f in json.loads((tmp_path / "ray" / "explore.json").read_text())[
                   "violations"])


def test_a_lost_ray_worker_s_cases_are_run_again(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # broken_skip_sync, whose protocol entry kills the Ray worker running the campaign's
    # first case (once: it leaves a marker file behind).
    text = (SCENARIOS / "broken_skip_sync.yaml").read_text().replace(
        "  name: static\n", "  entry: tests.ray_entries:host_main\n"
        "  knobs_class: elastic_sim.protocols.static.settings:StaticKnobs\n")
    assert "tests.ray_entries" in text
    scenario = tmp_path / "killing.yaml"
    scenario.write_text(text)
    common = [str(scenario), "--budget", "12", "--seed", "1"]
    assert main(["explore", *common, "--workers", "2", "--out", str(tmp_path / "local")]) == 1
    marker = tmp_path / "killed"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    monkeypatch.setenv(SPARE_ENV, str(os.getpid()))
    assert main(["explore", *common, "--ray", "--out", str(tmp_path / "ray")]) == 1
    assert marker.is_file()  # a worker was killed (its pid is in the file) ...
    assert int(marker.read_text()) != os.getpid()  # ... a Ray worker, not this process
    local, on_ray = _findings(tmp_path / "local"), _findings(tmp_path / "ray")
    assert local and on_ray == local  # ... and its cases were run again


def test_explore_with_varied_knobs_on_ray_finds_what_two_workers_find(tmp_path: Path) -> None:
    common = [str(SCENARIOS / "broken_skip_sync.yaml"), "--budget", "10", "--seed", "3",
              "--vary", "knobs.skip_state_broadcast=true,false"]
    assert main(["explore", *common, "--workers", "2", "--out", str(tmp_path / "w2")]) == 1
    assert main(["explore", *common, "--ray", "--out", str(tmp_path / "ray")]) == 1
    local, on_ray = _findings(tmp_path / "w2"), _findings(tmp_path / "ray")
    assert local and on_ray == local


def test_sweep_on_a_local_ray_writes_the_same_runs(tmp_path: Path) -> None:
    common = [str(SCENARIOS / "scale_down.yaml"), "--seeds", "4-6"]
    main(["sweep", *common, "--out", str(tmp_path / "local")])
    main(["sweep", *common, "--ray", "--out", str(tmp_path / "ray")])

    def runs(root: Path) -> dict[str, tuple[str, str]]:
        out = {}
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            s = json.loads((d / "summary.json").read_text())
            assert (d / "trace.jsonl").is_file()
            out[d.name] = (s["verdict"], s["trace"]["sha256"])
        return out

    assert runs(tmp_path / "ray") == runs(tmp_path / "local")
    assert len(runs(tmp_path / "ray")) == 3
    assert (tmp_path / "ray" / "campaign.html").is_file()


def test_an_unreachable_cluster_is_bad_input(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    rc = main(["sweep", "scale_down", "--seeds", "1", "--ray", "127.0.0.1:1",
               "--out", str(tmp_path)])
    assert rc == 2
    assert "cannot join the Ray cluster at '127.0.0.1:1'" in capsys.readouterr().err


def test_compare_runs_on_a_local_ray_give_the_local_figures(tmp_path: Path) -> None:
    common = ["compare", str(SCENARIOS / "scale_down.yaml"), "--modes", "sim", "--runs", "3"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--ray", "--out", str(tmp_path / "ray")]) == 0

    def runs(root: Path) -> list[dict[str, Any]]:
        got = json.loads((root / "compare.json").read_text())["summaries"]["sim"]["runs"]
        for r in got:
            assert Path(r.pop("out_dir")).parent == root / "sim"
        return got

    local = runs(tmp_path / "local")
    assert [r["seed"] for r in local] == [0, 1, 2] and runs(tmp_path / "ray") == local
    for k in range(3):  # every run's files came back
        assert (tmp_path / "ray" / "sim" / f"run{k}" / "trace.jsonl").is_file()
