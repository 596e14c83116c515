"""Protocol entries that strain the tool: a busy loop at one instant of virtual time, a
loop that lasts long in wall time, a loop that keeps allocating."""

from __future__ import annotations

from typing import Any

from elastic_sim.protocols.api import Runtime


async def spin(rt: Runtime, args: Any) -> int:
    """Start normally, then busy-loop at one instant (sleep(0) forever)."""
    await rt.sleep(0.5)
    rt.record("spin_start")
    while True:
        await rt.sleep(0)


async def crawl(rt: Runtime, args: Any) -> int:
    """Advance virtual time in tiny steps for a very long while (legal, just slow)."""
    rt.record("crawl_start")
    while True:
        await rt.sleep(1e-6)


async def hoard(rt: Runtime, args: Any) -> int:
    """Advance virtual time and keep 4 KiB more memory at every step."""
    kept = []
    rt.record("hoard_start")
    while True:
        kept.append(bytearray(4 << 10))
        await rt.sleep(1e-3)


async def block(rt: Runtime, args: Any) -> int:
    """Never give control back: a loop without an await inside one step."""
    rt.record("block_start")
    n = 0
    while True:
        n += 1
