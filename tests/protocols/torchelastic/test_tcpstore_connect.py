"""The worker's ``env://`` store connect gives up when upstream's TCPStore client would:
past its timeout, after the back-off retries of c10d's connect loops."""

from __future__ import annotations

import random
from pathlib import Path

from elastic_sim.protocols.torchelastic.tcpstore import Backoff, give_up_after
from elastic_sim.runner import simulate
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


class Midpoint(random.Random):
    """Every jittered draw at the middle of its range: the interval itself."""

    def randint(self, a: int, b: int) -> int:
        return (a + b) // 2


def test_backoff_is_upstreams_exponential_with_jitter() -> None:
    b = Backoff(Midpoint())
    assert [b.next() for _ in range(6)] == [0.5, 0.75, 1.125, 1.687, 2.53, 3.795]
    rng = random.Random(3)
    b = Backoff(rng)
    for interval in (0.5, 0.75, 1.125, 1.687):
        assert interval * 0.5 - 1e-9 <= b.next() <= interval * 1.5 + 1e-9
    capped = Backoff(Midpoint())
    assert max(capped.next() for _ in range(40)) == 60.0


def test_give_up_time_follows_both_connect_loops() -> None:
    # try 0: sleeps 0.5+0.75+1.125+1.687+2.53 (6.592 s), 3.795 s would pass its 10 s
    # deadline; then 5.692 s before try 1, which sleeps 8.538 s and then gives up:
    # 6.592 + 5.692 + 8.538 = 20.822 s for a 10 s timeout.
    assert abs(give_up_after(10.0, Midpoint()) - 20.822) < 1e-9
    times = [give_up_after(10.0, random.Random(s)) for s in range(200)]
    assert all(10.0 < t < 40.0 for t in times)
    assert 15.0 < sorted(times)[100] < 25.0  # "retrying (try=0...)" then "(try=1)"


def test_rank0_host_crash_worker_gives_up_late_as_upstream() -> None:
    sc = load_scenario(ROOT / "scenarios" / "torchelastic" / "rank0_host_crash.yaml")
    events, metrics, _ = simulate(sc, sc.seed)
    gave_up = [e for e in events if e.kind == "proc_exit" and e.proc == "h2/w0"
               and "gave up after" in str(e.get("reason"))]
    assert gave_up, "h2's worker should fail by c10d's give-up, not at its timeout"
    # h1's worker times out in group init first; h1's agent restarts, and h2's agent
    # restarts for the waiting node (SIGTERM to its still-connecting worker), as torchrun
    restarts = [(e.proc, e.get("reason")) for e in events if e.kind == "agent_restart"]
    assert ("h2/main", "nodes_waiting") in restarts
    assert metrics.outcome == "failed"
