"""clean_shutdown does not judge a worker that discovery removed from the job before it
completed, when that worker's host is the coordinator's (Horovod: the driver's host)."""

from __future__ import annotations

from pathlib import Path

from elastic_sim.checks.jobend import clean_shutdown
from elastic_sim.testing import load, simulate

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios/horovod/ray_random_discovery.yaml"


def test_a_removed_worker_on_the_drivers_host_is_not_an_unclean_shutdown() -> None:
    # Seed 8: discovery removes h1 (the driver's host) at 28.03 s; the reset at 30.153 s
    # assigns h2..h4 only, h1's worker aborts with RemovedFromJob and, paying its exit
    # cost, exits 134 at 30.303 s, after the others' job_done (30.154 s); the driver
    # ignores that exit and the job completes.
    events, _, _ = simulate(load(SCENARIO), 8)
    done = min(e.t for e in events if e.kind == "job_done")
    late = [e for e in events if e.kind == "proc_exit" and e.proc == "h1/w0.7"]
    assert late and late[0].t > done and late[0].get("code") == 134
    assert any(e.kind == "hvd_exit_ignored" and e.proc == "h1/main" for e in events)
    res = clean_shutdown(events)
    assert res.ok, [v.message for v in res.violations]
    assert res.checked >= 3  # the finishers' processes were examined
    # The driver itself is still judged: make its exit fail and the check fires.
    bad = [e if not (e.kind == "proc_exit" and e.proc == "h1/main")
           else type(e)(e.t, e.host, e.proc, e.kind, {**e.data, "code": 1}) for e in events]
    assert not clean_shutdown(bad).ok
