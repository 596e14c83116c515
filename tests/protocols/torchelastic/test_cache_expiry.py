"""The rendezvous state cache's expiry, the agent's ``until()`` hint to ``Runtime.poll``:
``cached()`` holds at every monotonic reading below it and at none from it on, to the
float (the sim skips the monitor loop's ticks before it, and asks at the first past it)."""

from __future__ import annotations

import math
import random

from elastic_sim.protocols.torchelastic.backend import C10dBackend
from elastic_sim.protocols.torchelastic.executor import StateHolder
from elastic_sim.protocols.torchelastic.state import RendezvousSettings
from tests.protocols.torchelastic.memstore import MemStore

SETTINGS = RendezvousSettings(run_id="t", min_nodes=1, max_nodes=2, last_call_timeout=1)


class _Clock:
    def __init__(self) -> None:
        self.mono = 0.0

    def monotonic(self) -> float:
        return self.mono

    def now_us(self) -> int:
        return 10**15


def _holder(cache_duration: float) -> tuple[StateHolder, _Clock]:
    clock = _Clock()
    return StateHolder(C10dBackend(MemStore(), "t"), SETTINGS, clock, cache_duration), clock


def _cached_at(holder: StateHolder, clock: _Clock, mono: float) -> bool:
    clock.mono = mono
    return holder.cached()


def test_the_expiry_is_the_first_reading_where_the_cache_is_stale() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        life = rng.choice([1.0, 0.3, 2.5, rng.uniform(0.001, 10.0)])
        holder, clock = _holder(life)
        holder.last_sync_time = rng.choice([0.0, rng.uniform(0.0, 1e4), rng.uniform(0.0, 10.0)])
        t = holder.cache_expiry()
        assert not _cached_at(holder, clock, t)
        assert _cached_at(holder, clock, math.nextafter(t, -math.inf))
        assert _cached_at(holder, clock, holder.last_sync_time)


def test_no_expiry_to_wait_for_when_the_cache_is_not_in_use() -> None:
    holder, _ = _holder(1.0)
    assert holder.cache_expiry() == -math.inf  # never synced
    holder.last_sync_time = 5.0
    assert holder.cache_expiry() > 5.0
    holder.mark_dirty()
    assert holder.cache_expiry() == -math.inf  # the next sync writes
    holder, _ = _holder(0.0)
    holder.last_sync_time = 5.0
    assert holder.cache_expiry() == -math.inf  # no cache
