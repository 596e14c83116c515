"""An agent that performs one c10d rendezvous round and leaves: for rendezvous tests and
the scale benchmark (the full elastic agent runs workers between rounds)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from elastic_sim.protocols.api import Runtime, Store
from elastic_sim.protocols.torchelastic.handler import DynamicRendezvousHandler
from elastic_sim.protocols.torchelastic.state import NodeDesc, RendezvousSettings


class CountingStore(Store):
    """A store client that counts the operations it sends (for 'store ops per agent')."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.timeout = inner.timeout
        self.ops = 0

    async def set(self, key: str, value: bytes) -> None:
        self.ops += 1
        await self.inner.set(key, value)

    async def get(self, key: str) -> bytes:
        self.ops += 1
        return await self.inner.get(key)

    async def add(self, key: str, amount: int) -> int:
        self.ops += 1
        return await self.inner.add(key, amount)

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        self.ops += 1
        return await self.inner.compare_set(key, expected, desired)

    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        self.ops += 1
        await self.inner.wait(keys, timeout)

    async def check(self, keys: Sequence[str]) -> bool:
        self.ops += 1
        return await self.inner.check(keys)

    async def delete(self, key: str) -> bool:
        self.ops += 1
        return await self.inner.delete(key)


def rendezvous_settings(raw: Mapping[str, Any]) -> RendezvousSettings:
    """Settings from knobs (unknown keys ignored, upstream defaults for missing ones)."""
    names = {f.name for f in dataclasses.fields(RendezvousSettings)}
    return RendezvousSettings(**{k: v for k, v in raw.items() if k in names})


MEMBERS_LISTED = 100
"""Up to this many members, ``rdzv_done`` lists them; above, it carries their digest (every
node listing 10,000 addresses would make a gigabyte of trace)."""


class MemberDigests:
    """The sha256 of the latest rounds' member lists, known by the list's identity: the
    nodes of a round that share objects (:meth:`~elastic_sim.protocols.api.Runtime.shared`)
    share one members tuple, so a digest is computed once a round, not once a node."""

    KEEP = 8

    def __init__(self) -> None:
        self._known: dict[int, tuple[tuple[NodeDesc, ...], str]] = {}
        """id(members) -> (members, digest); holding the tuple keeps its id from reuse."""

    def of(self, members: tuple[NodeDesc, ...]) -> str:
        """The digest of ``members`` (``addr pid local_id`` lines)."""
        known = self._known.get(id(members))
        if known is None or known[0] is not members:
            text = "\n".join(f"{n.addr} {n.pid} {n.local_id}" for n in members)
            known = self._known[id(members)] = (members,
                                                hashlib.sha256(text.encode()).hexdigest())
            if len(self._known) > self.KEEP:
                del self._known[next(iter(self._known))]
        return known[1]


def _members_field(members: tuple[NodeDesc, ...], digests: MemberDigests) -> dict[str, Any]:
    if len(members) <= MEMBERS_LISTED:
        return {"members": [n.addr for n in members]}
    return {"members_count": len(members), "members_sha256": digests.of(members)}


async def rendezvous_once(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Join one round through a store hosted by ``args['store_host']``; record the result."""
    knobs = dict(args.get("knobs", {}))
    settings = rendezvous_settings(knobs)
    port = int(knobs.get("store_port", 29400))
    store_host = str(args["store_host"])
    if rt.host == store_host:
        await rt.host_store(port)
    store = CountingStore(await rt.connect_store(f"{store_host}:{port}",
                                                 float(knobs.get("read_timeout", 60.0))))
    node = NodeDesc(rt.host, rt.info.pid, 0)
    handler = DynamicRendezvousHandler(rt, node, settings, store)
    await handler.init()
    info = await handler.next_rendezvous()
    ops_at_join = store.ops
    rt.record("rdzv_done", round=info.round, rank=info.rank, world_size=info.world_size,
              store_ops=ops_at_join,
              **_members_field(info.members, rt.shared("torchelastic.join_once.digests",
                                                       MemberDigests)))
    # Leave only when everyone has seen the round complete: closing earlier would fail a
    # participant that syncs late (JoinOp looks at `closed` first).
    done = await info.store.add("bench/joined", 1)
    while done < info.world_size:
        await rt.sleep(0.5)
        done = await info.store.add("bench/joined", 0)
    await handler.shutdown()
    if rt.host == store_host:
        await rt.sleep(1.0)  # keep serving while the others close
    return 0
