"""Sampled recoveries are kept on disk and reused: a second study with the same model,
size and knobs simulates nothing again and composes the same numbers; a changed knob
simulates afresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.study import sampling
from elastic_sim.study.cache import SampleCache
from elastic_sim.study.load import load_study
from elastic_sim.study.run import run_study

STUDY = """\
name: {name}
protocol: {{name: torchelastic, knobs: {{max_restarts: {restarts}, pg_timeout: 600}}}}
cluster: {{nodes: 4, gpus_per_node: 2}}
workload: {{step_time: 10, checkpoint_interval: 600, resubmit: 120}}
failures:
  mtbf_per_node: 43200
  causes:
    - {{name: node, share: 3, effect: host, downtime: 300}}
    - {{name: software, share: 1, effect: process}}
horizon_days: 1
replications: 20
method: composed
"""


def _study(tmp_path: Path, name: str, restarts: int = 3) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(name=name, restarts=restarts), encoding="utf-8")
    return path


def test_a_second_study_reads_its_samples_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_dir = tmp_path / "cache"
    first = run_study(load_study(_study(tmp_path, "first")), cache=SampleCache(cache_dir))
    assert first.sampled is not None
    assert first.sampled.ran > 0 and first.sampled.cached == 0
    assert list(cache_dir.rglob("*.json"))

    def no_simulation(*args: object) -> None:
        raise AssertionError("a cached sample was simulated again")

    monkeypatch.setattr(sampling, "run_sample", no_simulation)
    # another study file (another name), the same model, size and knobs
    second = run_study(load_study(_study(tmp_path, "second")), cache=SampleCache(cache_dir))
    assert second.sampled is not None
    assert second.sampled.ran == 0
    assert second.sampled.cached == first.sampled.ran
    assert second.results[0].goodput == first.results[0].goodput
    assert [m.to_json() for m in second.sampled.measured] == \
        [m.to_json() for m in first.sampled.measured]


def test_a_changed_knob_is_simulated_afresh(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    first = run_study(load_study(_study(tmp_path, "first")), cache=SampleCache(cache_dir))
    other = run_study(load_study(_study(tmp_path, "other", restarts=5)),
                      cache=SampleCache(cache_dir))
    assert first.sampled is not None and other.sampled is not None
    assert other.sampled.ran == first.sampled.ran and other.sampled.cached == 0


def test_no_cache_keeps_nothing(tmp_path: Path) -> None:
    res = run_study(load_study(_study(tmp_path, "first")), cache=SampleCache(None))
    assert res.sampled is not None and res.sampled.ran > 0
    again = run_study(load_study(_study(tmp_path, "first")), cache=SampleCache(None))
    assert again.sampled is not None and again.sampled.ran == res.sampled.ran
    assert again.results[0].goodput == res.results[0].goodput  # deterministic
