"""Campaigns on Ray (``--ray``): a local Ray finds what local worker processes find, for
the same search seed and budget, and a sweep's runs come back with their files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from tests.conftest import SCENARIOS

pytest.importorskip("ray", reason="Ray is an optional extra: elastic-sim[ray]")
pytestmark = pytest.mark.slow


def _findings(out: Path) -> list[dict[str, Any]]:
    found = json.loads((out / "explore.json").read_text())["violations"]
    return [{k: v for k, v in f.items() if k not in ("reproducer", "run_dir")} for f in found]


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
