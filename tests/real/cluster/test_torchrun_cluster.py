"""``--mode torchrun`` through the cluster launchers: a validation run on a cluster is
``elastic-sim compare SCENARIO --modes sim,torchrun --launcher slurm`` inside an
allocation. Here on the project's one-machine Slurm (skipped, with the reason, where it
cannot be set up): every node runs its hosts' torchrun agents, the coordinator converts
upstream's streams, and nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.procs import processes_mentioning
from tests.real.cluster.conftest import ROOT, cli, events

pytest.importorskip("torch", reason="torchrun mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]

WORKER_CRASH = ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml"
LEFTOVERS = ("elastic_sim.real.cluster.node", "elastic_sim.real.torchrun.agent",
             "real/torchrun/worker.py")


def test_compare_sim_and_torchrun_through_a_real_slurm(slurm: dict[str, str],
                                                       tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    done = cli("compare", str(WORKER_CRASH), "--modes", "sim,torchrun", "--launcher", "slurm",
               "--out", str(out), env=slurm, prefix=("salloc", "--ntasks=2", "--quiet"))
    # 1 only for a time outside the tolerance (timing on a loaded machine)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    doc = json.loads((out / "compare.json").read_text())
    assert doc["structural"] == []
    tr = doc["summaries"]["torchrun"]
    assert tr["membership"] == [["h0", "h1"], ["h0", "h1"]] and tr["outcome"] == "completed"
    assert tr["recoveries"]["kill-h1-worker"]["recovery_s"] > 0
    run = out / "torchrun" / "run0"
    # one Slurm task per host, each a node on the coordinator's time axis
    assert sorted(tuple(e["data"]["hosts"]) for e in events(run, "clock_sync")) == [
        ("h0",), ("h1",)]
    # every node on this machine: each host's agent at its own loopback address, as locally
    (setup,) = events(run, "torchrun_setup")
    argv = setup["data"]["argv"]
    assert "--local-addr=127.0.1.1" in argv["h0"] and "--local-addr=127.0.1.2" in argv["h1"]
    assert "--launcher slurm" in setup["data"]["network"]
    # the fault was fired by the coordinator and carried out by h1's node
    (start,) = [e for e in events(run, "fault") if e["data"]["phase"] == "start"]
    assert start["data"]["id"] == "kill-h1-worker" and "reason" not in start["data"]
    # upstream's streams from both nodes were converted together: each round's members
    # are rebuilt from both agents' reports
    done_by = {(e["host"], e["data"]["round"]): e["data"]["members"]
               for e in events(run, "rdzv_done")}
    assert set(done_by) == {("h0", 0), ("h1", 0), ("h0", 1), ("h1", 1)}
    assert all(m == ["h0", "h1"] for m in done_by.values())
    steps = [e["data"]["step"] for e in events(run, "step") if e["host"] == "h1"]
    assert max(steps) == 120  # h1's worker, restarted by its agent, finished the workload
    assert [p for text in LEFTOVERS for p in processes_mentioning(text)] == []
