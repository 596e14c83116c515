"""Object and byte broadcast from a root, built on a group's fixed-size broadcast.

Receivers of a tensor broadcast must know its size, so an object goes as two collectives:
its length (8 bytes), then its payload. Objects are JSON, never pickle: a broadcast carries
bytes that came off the network.
"""

from __future__ import annotations

import json
from typing import Any

from elastic_sim.protocols.api import TracedGroup

SIZE_BYTES = 8


async def broadcast_bytes(group: TracedGroup, data: bytes | None, root: int) -> bytes:
    """Root's ``data`` (of any length) to every member: size first, then payload."""
    if group.rank == root:
        if data is None:
            raise ValueError("the root of a broadcast must pass its data")
        header = len(data).to_bytes(SIZE_BYTES, "little")
    else:
        header = bytes(SIZE_BYTES)
    size = int.from_bytes(await group.broadcast(header, root), "little")
    payload = data if group.rank == root and data is not None else bytes(size)
    return await group.broadcast(payload, root)


async def broadcast_object(group: TracedGroup, obj: Any, root: int) -> Any:
    """Root's JSON-serialisable ``obj`` to every member (others pass anything, e.g. None)."""
    data = json.dumps(obj, sort_keys=True).encode() if group.rank == root else None
    return json.loads(await broadcast_bytes(group, data, root))
