"""A job stuck without progress stays stuck to the horizon, unless the study's stall
watchdog (workload.stall_timeout) kills it, and the scheduler resubmits it. The job here
gets stuck as the faithful model says torchelastic does: separate stores and a hot spare
waiting, a worker crash restarts every round as soon as it forms (the wait-list
livelock)."""

from __future__ import annotations

from pathlib import Path

from elastic_sim.study.cache import SampleCache
from elastic_sim.study.load import load_study
from elastic_sim.study.run import run_study

STUDY = """\
name: stall
protocol: {{name: torchelastic, knobs: {{max_restarts: 100, pg_timeout: 600,
           join_timeout: 600, share_store: false}}}}
cluster: {{nodes: 4, gpus_per_node: 2, spares: 1}}
workload: {{step_time: 10, checkpoint_interval: 600, resubmit: 120{stall}}}
failures:
  mtbf_per_node: 43200
  causes:
    - {{name: software, share: 1, effect: process}}
horizon_days: 1
replications: 20
method: composed
"""


def test_the_stall_watchdog_turns_a_hang_into_a_resubmission(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path / "cache")
    results = {}
    for name, stall in (("stuck", ""), ("watched", ", stall_timeout: 600")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(STUDY.format(stall=stall), encoding="utf-8")
        results[name] = run_study(load_study(path), cache=cache).results[0]
    stuck, watched = results["stuck"], results["watched"]
    # without the watchdog a worker crash leaves this job stuck
    assert stuck.fates().get("hung", 0) > 10
    assert "hung" not in watched.fates()
    assert sum(r.job_failures for r in watched.runs) > sum(r.job_failures for r in stuck.runs)
    assert watched.goodput.mean > stuck.goodput.mean + 0.2
    # the watchdog's wait is charged as the job's failure, to the cause that stuck it
    assert watched.lost()["software"]["job failure"].mean > 0
