"""The Gloo adapter (``elastic_sim.real.runtime.group.GlooGroup``) in one process: two
members of one group on one event loop, so a pending collective and an abort can be
staged exactly."""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from elastic_sim.protocols.api import CollectiveFailed

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="real mode needs torch"),
]

R = TypeVar("R")
Members = tuple[Any, Any, list[str]]
"""Rank 0's and rank 1's ``GlooGroup``, and the names of the calls made on the pool."""


def with_members(body: Callable[[Any, Any, list[str]], Awaitable[None]]) -> None:
    """Run ``body(g0, g1, pooled)`` on a fresh two-member group (timeout 60 s)."""
    from elastic_sim.real.runtime.group import new_group
    from elastic_sim.real.runtime.store import connect_store, host_store

    async def main() -> None:
        loop = asyncio.get_running_loop()
        pooled: list[str] = []

        def blocking(fn: Callable[[], R]) -> asyncio.Future[R]:
            pooled.append(getattr(fn, "__name__", type(fn).__name__))
            return loop.run_in_executor(None, fn)

        server = await host_store(blocking, "127.0.0.1", 0)
        stores = [await connect_store(blocking, "127.0.0.1", int(server.port), 10.0)
                  for _ in range(2)]
        g0, g1 = await asyncio.gather(*(
            new_group(blocking, "127.0.0.1", stores[r], "g", r, 2, 60.0) for r in range(2)))
        pooled.clear()
        try:
            await asyncio.wait_for(body(g0, g1, pooled), 30.0)
        finally:
            g0.abort()
            g1.abort()
            await asyncio.sleep(0.2)  # the groups are destroyed on the pool
        del server

    asyncio.run(main())


def mapping_mode(buf: memoryview) -> str:
    """The permissions column of the memory mapping holding ``buf`` ("rw-p": private)."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, mode = line.split()[:2]
        start, end = (int(x, 16) for x in span.split("-"))
        if start <= address < end:
            return mode
    raise AssertionError(f"no mapping holds {address:#x}")


def test_collectives_and_point_to_point_deliver_the_bytes() -> None:
    payload = bytes(range(256)) * 4096  # 1 MB

    async def body(g0: Any, g1: Any, pooled: list[str]) -> None:
        sent, got = await asyncio.gather(g0._broadcast(payload, 0),
                                         g1._broadcast(bytes(len(payload)), 0))
        assert sent is payload  # the root's own buffer, read only
        assert bytes(got) == payload
        assert not got.readonly  # the receiver's own buffer
        # ... in private memory (shared anonymous memory faults and unmaps slower: 10% of
        # a 64 MB broadcast at 4 members on 2 cores)
        assert mapping_mode(got) == "rw-p"
        sums = await asyncio.gather(g0._allreduce([1.0, 2.0]), g1._allreduce([10.0, 20.0]))
        assert sums == [[11.0, 22.0]] * 2
        # A collective completes through Gloo's future: no pool thread waits for it.
        assert pooled == []
        _, received = await asyncio.gather(g1._send(0, payload[:1000]), g0._recv(1, 1000))
        assert bytes(received) == payload[:1000]

    with_members(body)


def test_abort_fails_a_pending_collective_at_once_and_every_later_one() -> None:
    async def body(g0: Any, g1: Any, pooled: list[str]) -> None:
        pending = asyncio.ensure_future(g0._allreduce([1.0]))  # rank 1 never joins
        await asyncio.sleep(0.3)
        assert not pending.done()
        g0.abort()
        with pytest.raises(CollectiveFailed, match="aborted"):
            await asyncio.wait_for(pending, 1.0)  # not the group's 60 s timeout
        with pytest.raises(CollectiveFailed, match="aborted"):
            await g0._broadcast(b"x", 0)

    with_members(body)


def test_a_peer_that_aborts_fails_a_pending_collective_with_gloos_error() -> None:
    async def body(g0: Any, g1: Any, pooled: list[str]) -> None:
        pending = asyncio.ensure_future(g0._broadcast(bytes(1000), 1))  # rank 1 never sends
        await asyncio.sleep(0.3)
        g1.abort()  # destroys its Gloo group: its connections close
        with pytest.raises(CollectiveFailed) as failed:
            await asyncio.wait_for(pending, 10.0)  # not the group's 60 s timeout
        assert "aborted" not in str(failed.value)  # Gloo's own error, carried as text

    with_members(body)
