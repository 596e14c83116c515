"""A node waiting for a round polls the store about once a second, as upstream's does.

Upstream's executor sleeps 1 s after a SYNC action, then syncs, and the state cache (1 s)
has always expired by then, since a real sleep wakes late. A simulator whose sleeps end on
the dot finds the cache still valid (its timestamps are equal, up to rounding), so the
node skips that poll and reads every 2 s: half the load on the store, and a round seen
complete up to a second late. :data:`elastic_sim.faults.world.WAKE_LATENCY` keeps the two apart."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sim.protocols.torchelastic.executor import StateHolder
from elastic_sim.world import WAKE_LATENCY, HostSpec, World

LATE = 10.0


def _reads(wake_latency: float, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times each of two nodes read the stored state while it waited for a third
    (min = max = 3) that comes at 10 s."""
    from elastic_sim import sim

    reads: dict[str, list[float]] = {}
    plain = StateHolder.sync

    async def counting(self: StateHolder) -> Any:
        before = self.last_sync_time
        out = await plain(self)
        if out is None and self.last_sync_time != before:  # a read, not the cache
            host = self.clock.rt.host  # type: ignore[attr-defined]  # a RuntimeClock
            reads.setdefault(host, []).append(self.last_sync_time)
        return out

    monkeypatch.setattr(StateHolder, "sync", counting)
    world = World(
        hosts=(HostSpec("n0"), HostSpec("n1"), HostSpec("n2", start_at=LATE)),
        entry="elastic_sim.protocols.torchelastic.join_once:rendezvous_once",
        args={"store_host": "n0", "knobs": {"min_nodes": 3, "max_nodes": 3, "run_id": "poll"}},
        wake_latency=wake_latency, time_limit=60.0,
    )
    sim.run(world, [], 0, lambda ev: None)
    # n0 and n1 started at 0 s, so their monotonic clocks read run time
    return [sum(1 for t in reads[h] if 1.0 <= t < LATE) for h in ("n0", "n1")]


def test_a_waiting_node_reads_the_state_every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    assert WAKE_LATENCY > 0
    # from 1 s to 10 s: one read a second, less the seconds a keep-alive write (every 5 s)
    # or the node's own join refreshed the state instead
    assert [n >= 7 for n in _reads(WAKE_LATENCY, monkeypatch)] == [True, True]


def test_sleeps_that_end_on_the_dot_halve_the_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug this guards against, shown: without a wake latency the waiters read about
    every 2 s."""
    assert [n <= 5 for n in _reads(0.0, monkeypatch)] == [True, True]
