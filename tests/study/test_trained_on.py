"""A study of a job of fixed work, run directly: restart-all torchelastic against torchft,
which trains on through a node's failure (the other replica groups keep stepping, the
replaced node's group heals from a live peer), and torchft at a per-step cost the model
does not simulate (``step_overhead``). A resubmitted restart-all job resumes from its last
checkpoint with only the steps left to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elastic_sim.study.load import load_study
from elastic_sim.study.outcome import SettingResult
from elastic_sim.study.run import run_study

STUDY = """\
name: trained_on
protocol: {{name: torchelastic, knobs: {{max_restarts: 3, pg_timeout: 600}}}}
cluster: {{nodes: 4, gpus_per_node: 1}}
workload:
  step_time: 10
  steps: 600
  checkpoint_interval: 500
  checkpoint_load: 30
  restart_overhead: 60
  resubmit: 120
failures:
  every: [1500, 1800]
  causes:
    - {{name: node, share: 1, effect: host, downtime: 120}}
horizon_days: 0.5
direct_replications: 1
compare:
  - {{label: restart-all, protocol: torchelastic}}
  - {{label: torchft, protocol: torchft}}
  - {{label: torchft slow, protocol: torchft, step_overhead: 5}}
{extra}"""


def _study(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "trained_on.yaml"
    path.write_text(STUDY.format(extra=extra), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SettingResult]:
    study = load_study(_study(tmp_path_factory.mktemp("study")))
    out = run_study(study)
    assert out.method == "direct" and "torchft has no composed level" in out.why
    return {r.label: r for r in out.results}


def _minutes(r: SettingResult) -> float:
    c = r.completion()
    assert c is not None, f"{r.label} did not complete: {r.fates()}"
    return 60 * c.mean


def test_a_resubmitted_job_of_fixed_work_resumes_from_its_checkpoint(
        results: dict[str, SettingResult]) -> None:
    """Every node failure kills this restart-all job (a lost node cannot rejoin a shared
    store); resubmitted, it does the steps its checkpoints do not hold and completes. A
    resubmission that started the 600 steps (100 minutes) over would not complete: a
    failure comes every 25-30 minutes."""
    ra = results["restart-all"]
    assert ra.fates() == {"completed": 1}
    assert ra.runs[0].job_failures >= 3
    # 100 minutes of steps, and each death costs its lost work, the resubmission and a start
    assert 100 < _minutes(ra) < 100 + ra.runs[0].job_failures * 25


def test_torchft_trains_on_and_charges_the_missing_replica_group(
        results: dict[str, SettingResult]) -> None:
    ft, ra = results["torchft"], results["restart-all"]
    run = ft.runs[0]
    assert run.fate == "completed" and run.job_failures == 0 and run.failures >= 3
    # each failure stalls the survivors for a minute or two, not a restart of the job
    assert all(30 < s < 150 for _, s in run.recoveries), run.recoveries
    assert _minutes(ft) < _minutes(ra)
    assert ft.goodput.mean > ra.goodput.mean
    # the replaced node's group was missing for its downtime and start, a quarter of the job
    lost = ft.lost()["node"]
    assert 0 < lost["degraded"].mean * 3600 < run.failures * (120 + 90 + 120) / 4
    assert "lost work" not in lost and "resubmit" not in lost


def test_a_per_step_overhead_costs_its_steps(results: dict[str, SettingResult]) -> None:
    fast, slow = results["torchft"], results["torchft slow"]
    # 600 steps x 5 s more: 50 minutes, give or take what the longer run's failures add
    assert 45 < _minutes(slow) - _minutes(fast) < 60
    over = slow.overhead()["step overhead"].mean * 3600
    assert over == pytest.approx(600 * 5, rel=0.02)
    assert fast.overhead()["step overhead"].mean == 0
    assert slow.goodput.mean < fast.goodput.mean - 0.2


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elastic_sim", "study", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("extra", "args", "field"), [
    ("method: composed\n", (), "method: direct or auto: protocol torchft"),
    ("", ("--method", "composed"), "--method: direct or auto: protocol torchft"),
    ("reference: {completion_minutes_of: {torch-ft: 930}}\n", (),
     "reference.completion_minutes_of.torch-ft: expected the label of a compared setting"),
])
def test_what_a_torchft_study_cannot_do_exits_2(tmp_path: Path, extra: str,
                                                args: tuple[str, ...], field: str) -> None:
    out = tmp_path / "out"
    got = _cli(str(_study(tmp_path, extra)), "--out", str(out), *args)
    assert got.returncode == 2, got.stderr
    assert field in got.stderr and "Traceback" not in got.stderr
    assert not out.exists()


LOOPING = """\
name: given_up
protocol: {{name: torchft}}
cluster: {{nodes: 3, gpus_per_node: {gpus}}}
workload: {{step_time: 10, steps: 600, checkpoint_interval: 500}}
failures:
  every: [1500, 1800]
  causes:
    - {{name: kill, share: 1, effect: process}}
horizon_days: 0.1
direct_replications: 1
"""


@pytest.mark.parametrize(("gpus", "given_up"), [(2, 3), (1, 0)])
def test_replica_groups_given_up_on_healthy_hosts_are_counted_and_said(
        tmp_path: Path, gpus: int, given_up: int) -> None:
    """A killed rank's group of two ranks is started into the stale Manager-address race
    (ft_group_recovers): the run counts the groups given up on healthy hosts and the
    setting says so. Here the first kill's group wins the race (the seeded draw) and
    comes back; the second's loses it, and its new server heartbeats, so the Lighthouse
    waits the join timeout (60 s) for it while the other groups' quorum requests time out
    (60 s): they are restarted into the same race, and all three are given up in turn:
    the job fails. Groups of one rank (rank 0 writes the address it reads) come back
    after every kill."""
    path = tmp_path / "given_up.yaml"
    path.write_text(LOOPING.format(gpus=gpus), encoding="utf-8")
    res = run_study(load_study(path)).results[0]
    assert [r.given_up for r in res.runs] == [given_up]
    noted = [n for n in res.notes if n.startswith("replica groups given up on healthy hosts")]
    if given_up:
        assert res.fates() == {"failed": 1}
        assert noted == [noted[0]] and "3.0 per run, in 1 of 1 runs" in noted[0]
        assert res.to_json()["groups_given_up_per_run"]["mean"] == 3
    else:
        assert res.fates() == {"completed": 1} and not noted
