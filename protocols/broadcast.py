"""Object and byte broadcast from a root, built on a group's fixed-size broadcast, or on
its point-to-point send/recv (a binomial tree, a pipelined chain).

Receivers of a tensor broadcast must know its size, so an object goes as two collectives:
its length (8 bytes), then its payload. Objects are JSON, never pickle: a broadcast carries
bytes that came off the network.

Algorithms for the payload (``Algorithm``, the workload's ``state_broadcast``):

- ``group``: the group's own broadcast (Gloo's; the sim prices it as a flat broadcast).
- ``tree``: a binomial tree over send/recv: ``ceil(log2 W)`` rounds, each a full-payload
  send; a member forwards to its subtrees, largest first.
- ``chain``: the payload cut into chunks of ``CHAIN_CHUNK_BYTES`` that flow down the ranks
  root, root+1, ...: a member forwards chunk k while it receives chunk k+1, so the time is
  about ``(W - 2 + C)`` chunk transfers for C chunks instead of ``W - 1`` payloads.

Send/recv are not numbered collectives (only the two ends take part): the size header
stays a group broadcast, so every member still enters the same collective sequence.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from elastic_sim.protocols.api import Received, Task, TracedGroup

SIZE_BYTES = 8
Algorithm = Literal["group", "tree", "chain"]
ALGORITHMS: tuple[Algorithm, ...] = ("group", "tree", "chain")
CHAIN_CHUNK_BYTES = 4 << 20
"""Chunk of the pipelined chain (4 MiB: large next to a message's fixed cost, small next
to a model's state)."""


async def broadcast_bytes(group: TracedGroup, data: bytes | None, root: int,
                          algorithm: Algorithm = "group",
                          chunk_bytes: int = CHAIN_CHUNK_BYTES, name: str = "") -> Received:
    """Root's ``data`` (of any length) to every member: size first, then payload, the
    payload by ``algorithm``. A receiver may get a bytearray (filled in place). With a
    ``name`` the two group broadcasts are named ``<name>.sz`` and ``<name>.t``, as
    Horovod's ``broadcast_object`` names them."""
    if group.rank == root:
        if data is None:
            raise ValueError("the root of a broadcast must pass its data")
        header = len(data).to_bytes(SIZE_BYTES, "little")
    else:
        header = bytes(SIZE_BYTES)
    size = int.from_bytes(await group.broadcast(header, root, _part(name, "sz")), "little")
    mine = data if group.rank == root and data is not None else None
    if algorithm == "tree":
        return await tree_broadcast(group, mine, size, root)
    if algorithm == "chain":
        return await chain_broadcast(group, mine, size, root, chunk_bytes)
    if algorithm != "group":
        raise ValueError(f"unknown broadcast algorithm {algorithm!r}; expected one of "
                         + ", ".join(ALGORITHMS))
    return await group.broadcast(bytes(size) if mine is None else mine, root, _part(name, "t"))


def _part(name: str, part: str) -> str:
    return f"{name}.{part}" if name else ""


async def tree_broadcast(group: TracedGroup, data: Received | None, size: int,
                         root: int) -> Received:
    """Root's ``size`` bytes to every member along a binomial tree of send/recv."""
    w, v = group.size, (group.rank - root) % group.size
    mask = 1
    while mask < w:  # a member receives once, from the member ``mask`` below it
        if v & mask:
            data = await group.recv((v - mask + root) % w, size)
            break
        mask <<= 1
    assert data is not None
    mask >>= 1
    while mask > 0:  # then sends to the heads of its subtrees, largest first
        if v + mask < w:
            await group.send((v + mask + root) % w, data)
        mask >>= 1
    return data


async def chain_broadcast(group: TracedGroup, data: bytes | None, size: int, root: int,
                          chunk_bytes: int = CHAIN_CHUNK_BYTES) -> Received:
    """Root's ``size`` bytes to every member down the chain root, root+1, ..., in chunks
    of ``chunk_bytes``: each member forwards one chunk while it receives the next."""
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    w, v = group.size, (group.rank - root) % group.size
    prev, nxt = (group.rank - 1) % w, (group.rank + 1) % w
    last = v == w - 1
    bounds = [(a, min(a + chunk_bytes, size)) for a in range(0, size, chunk_bytes)]
    if v == 0:
        assert data is not None
        view = memoryview(data)
        for a, b in bounds:
            if w > 1:
                await group.send(nxt, view[a:b])  # a view: the root copies nothing
        return data
    out = bytearray(size)
    sending: Task[None] | None = None
    for a, b in bounds:
        piece = await group.recv(prev, b - a)
        out[a:b] = piece
        if sending is not None:
            await sending
            sending = None
        if not last:
            sending = group.spawn(group.send(nxt, piece), "chain-forward")
    if sending is not None:
        await sending
    return out


async def broadcast_object(group: TracedGroup, obj: Any, root: int, name: str = "") -> Any:
    """Root's JSON-serialisable ``obj`` to every member (others pass anything, e.g. None);
    ``name`` as :func:`broadcast_bytes` takes it."""
    data = json.dumps(obj, sort_keys=True).encode() if group.rank == root else None
    return json.loads(bytes(await broadcast_bytes(group, data, root, name=name)))
