"""Figures per process and per node: with several workers per node (one per GPU), a step
is a step of the job (whichever worker made it), samples count every worker, and the world
is told in processes (torchrun's WORLD_SIZE) and in nodes. Hand-worked for 1, 2 and 8
workers per node, and for Horovod's ranks (a host listed once per slot)."""

from __future__ import annotations

import pytest

from elastic_sim.pipeline import simulate
from elastic_sim.reports.metrics import goodput
from elastic_sim.scenario import load_scenario, parse_scenario
from tests.conftest import SCENARIOS

BATCH = 32
TORCHELASTIC = """
name: np{n}
protocol:
  name: torchelastic
  knobs: {{nproc_per_node: {n}, min_nodes: 2, max_nodes: 2, max_restarts: 3,
          monitor_interval: 0.1, keep_alive_interval: 1, heartbeat_timeout: 1,
          last_call_timeout: 1, join_timeout: 60, pg_timeout: 30}}
cluster: {{hosts: 2, store_host: h0}}
workload: {{steps: 60, step_time: 0.1, commit_every: 10, state_bytes: 65536,
           batch_size: {batch}}}
faults: [{faults}]
"""


def _run(n: int, faults: str = ""):  # type: ignore[no-untyped-def]
    sc = parse_scenario(__import__("yaml").safe_load(
        TORCHELASTIC.format(n=n, batch=BATCH, faults=faults)))
    return simulate(sc, 0)


@pytest.mark.parametrize("n", [1, 2, 8])
def test_a_worker_crash_loses_the_job_s_steps_once_and_every_worker_s_samples(n: int) -> None:
    # h1's last local rank dies right after step 25: the job resumes from commit 20.
    _, m, _ = _run(n, f"{{type: crash_process, proc: h1/w{n - 1}, at_step: 25}}")
    assert m.outcome == "completed"
    assert [(r.nodes, r.processes) for r in m.rounds] == [(2, 2 * n), (2, 2 * n)]
    assert m.world_sizes == [2, 2]  # the protocol's members: nodes, for torchelastic
    assert m.lost_steps == 5  # steps 21..25, once for the job (not once per worker)
    assert m.lost_samples == 5 * (2 * n) * BATCH  # every worker's batch of those steps
    (rec,) = m.recoveries
    assert rec.lost_steps == 5


@pytest.mark.parametrize("n", [1, 2, 8])
def test_goodput_counts_each_step_of_the_job_once(n: int) -> None:
    # Fault-free: every step counts, nothing stalls; goodput is the time from the sync to
    # the last step (the lead worker's), over the time to the job's end.
    events, m, _ = _run(n)
    g = goodput(events, m.rounds, m.end_time, m.stalls, m.rollbacks)
    lead = min((e for e in events if e.kind == "sync"), key=lambda e: e.get("rank")).proc
    sync = next(e.t for e in events if e.kind == "sync" and e.proc == lead)
    last = max(e.t for e in events if e.kind == "step" and e.proc == lead)
    done = max(e.t for e in events if e.kind == "job_done")
    assert g.wasted_s == 0 and g.stalled_s == 0
    assert g.ratio == pytest.approx((last - sync) / done, rel=1e-9)
    assert g.ratio > 0.5


def test_horovod_s_ranks_are_processes_and_its_hosts_nodes() -> None:
    sc = load_scenario(SCENARIOS / "horovod" / "single_rank_failure_8slots.yaml")
    _, m, _ = simulate(sc, sc.seed)
    assert [(r.nodes, r.processes) for r in m.rounds] == [(2, 16), (1, 8)]
    assert m.world_sizes == [16, 8]  # Horovod's size: ranks
