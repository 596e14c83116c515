"""Worker rank assignment of the elastic agent (upstream ``_assign_worker_ranks``).

Two paths, as upstream: the default one goes through the round's prefixed store (every
agent publishes its role info, group rank 0 computes everyone's ranks and publishes them,
everyone reads its own back: a barrier in effect), and the identical-workers fast path
(``TORCH_ELASTIC_WORKER_IDENTICAL=1``) computes them locally with no store traffic. The
arithmetic is a pure function over plain data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from elastic_sim.protocols.api import Store

ROLE_INFO_PREFIX = "torchelastic/role_info/"
ASSIGNED_RANKS_PREFIX = "torchelastic/assigned_ranks/"
DEFAULT_ROLE = "default"


@dataclass(frozen=True)
class RoleInfo:
    """What one agent publishes about itself (upstream ``_RoleInstanceInfo``)."""

    role: str
    group_rank: int
    local_world_size: int

    def serialize(self) -> bytes:
        """JSON, as upstream."""
        return json.dumps({"role": self.role, "rank": self.group_rank,
                           "local_world_size": self.local_world_size}).encode()

    @staticmethod
    def deserialize(data: bytes) -> RoleInfo:
        """Inverse of :meth:`serialize`."""
        obj = json.loads(data)
        return RoleInfo(str(obj["role"]), int(obj["rank"]), int(obj["local_world_size"]))


@dataclass(frozen=True)
class AgentRanks:
    """An agent's slice of the world: its workers are ``base .. base + local_world_size``."""

    base_global_rank: int
    global_world_size: int
    base_role_rank: int
    role_world_size: int

    def to_json(self) -> bytes:
        """The assigned-ranks value rank 0 writes for one agent."""
        return json.dumps([self.base_global_rank, self.global_world_size,
                           self.base_role_rank, self.role_world_size]).encode()

    @staticmethod
    def from_json(data: bytes) -> AgentRanks:
        """Inverse of :meth:`to_json`."""
        a, b, c, d = json.loads(data)
        return AgentRanks(int(a), int(b), int(c), int(d))


def compute_ranks(infos: Sequence[RoleInfo]) -> list[AgentRanks]:
    """Rank 0's computation, in group-rank order: global base ranks are the prefix sums
    of local world sizes, role ranks the prefix sums within each role."""
    role_sizes: dict[str, int] = {}
    global_size = 0
    for info in infos:
        role_sizes[info.role] = role_sizes.get(info.role, 0) + info.local_world_size
        global_size += info.local_world_size
    out = []
    base_global = 0
    role_next: dict[str, int] = {}
    for info in infos:
        base_role = role_next.get(info.role, 0)
        out.append(AgentRanks(base_global, global_size, base_role, role_sizes[info.role]))
        role_next[info.role] = base_role + info.local_world_size
        base_global += info.local_world_size
    return out


def identical_ranks(group_rank: int, group_world_size: int, local_world_size: int) -> AgentRanks:
    """The fast path: every agent runs the same number of workers of one role."""
    world = group_world_size * local_world_size
    base = group_rank * local_world_size
    return AgentRanks(base, world, base, world)


async def assign_ranks(
    store: Store, group_rank: int, group_world_size: int, local_world_size: int,
    identical: bool, role: str = DEFAULT_ROLE,
) -> AgentRanks:
    """This agent's ranks for the round whose prefixed store is ``store``.

    The default path blocks (up to the store's read timeout, then StoreTimeout) until
    every agent of the round has published its role info."""
    if identical:
        return identical_ranks(group_rank, group_world_size, local_world_size)
    await store.set(f"{ROLE_INFO_PREFIX}{group_rank}",
                    RoleInfo(role, group_rank, local_world_size).serialize())
    if group_rank == 0:
        keys = [f"{ROLE_INFO_PREFIX}{i}" for i in range(group_world_size)]
        await store.wait(keys)  # multi_get blocks like get
        infos = [RoleInfo.deserialize(await store.get(k)) for k in keys]
        for i, ranks in enumerate(compute_ranks(infos)):
            await store.set(f"{ASSIGNED_RANKS_PREFIX}{i}", ranks.to_json())
    return AgentRanks.from_json(await store.get(f"{ASSIGNED_RANKS_PREFIX}{group_rank}"))
