"""Helpers for the sim tests: build a world, run it, read the trace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.protocols.api import Runtime, Store, TracedGroup
from elastic_sim.sim import run
from elastic_sim.trace import TraceEvent, encode
from elastic_sim.world import CollectiveModel, HostSpec, LinkSpec, RunResult, World

L = 0.001
"""Default link latency of the test worlds: a star, so host to host is 2 * L."""


def make_world(
    entry: str,
    hosts: Sequence[str | HostSpec] = ("h0", "h1"),
    args: dict[str, Any] | None = None,
    *,
    topology: str = "star",
    latency: float = L,
    bandwidth: float = 1e9,
    links: Sequence[LinkSpec] = (),
    collectives: CollectiveModel | None = None,
    time_limit: float = 100.0,
    wake_latency: float = 0.0,
) -> World:
    """A small world running ``entry`` on every host. Sleeps end on the dot unless
    ``wake_latency`` says otherwise: these tests time the network, the store and the
    collectives to the nanosecond, not how late an OS wakes a sleeper."""
    specs = tuple(h if isinstance(h, HostSpec) else HostSpec(h) for h in hosts)
    return World(
        hosts=specs,
        entry=entry,
        args=args or {},
        topology=topology,  # type: ignore[arg-type]
        latency=latency,
        bandwidth=bandwidth,
        links=tuple(links),
        collectives=collectives or CollectiveModel(),
        time_limit=time_limit,
        wake_latency=wake_latency,
    )


def simulate(
    world: World, faults: Sequence[Fault] = (), seed: int = 0
) -> tuple[RunResult, list[TraceEvent]]:
    """Run and collect the trace."""
    events: list[TraceEvent] = []
    result = run(world, faults, seed, events.append)
    return result, events


def trace_bytes(events: Sequence[TraceEvent]) -> bytes:
    """The trace as written to disk."""
    return "".join(encode(e) + "\n" for e in events).encode()


def of(events: Sequence[TraceEvent], kind: str, proc: str | None = None) -> list[TraceEvent]:
    """Events of ``kind`` (of process ``proc``)."""
    return [e for e in events if e.kind == kind and (proc is None or e.proc == proc)]


def one(events: Sequence[TraceEvent], kind: str, proc: str | None = None) -> TraceEvent:
    """The single event of ``kind`` (of ``proc``)."""
    found = of(events, kind, proc)
    assert len(found) == 1, (kind, proc, found)
    return found[0]


async def h0_store(rt: Runtime) -> Store:
    """A client of the store h0 hosts on port 29500 (h0 hosts it; the others connect a
    moment later)."""
    if rt.host == "h0":
        await rt.host_store(29500)
    else:
        await rt.sleep(0.001)
    return await rt.connect_store("h0:29500", timeout=10)


async def group_of_hosts(rt: Runtime, size: int, timeout: float) -> TracedGroup:
    """Host ``h<i>`` as rank ``i`` of a group ``g`` of ``size`` over h0's store, once
    every member passed a barrier."""
    g = await rt.new_group(await h0_store(rt), "g", int(rt.host[1:]), size, timeout)
    await g.barrier()
    return g
