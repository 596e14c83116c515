"""What one rank of one replica group makes of an issued quorum (src/manager.rs
``compute_quorum_results``), as a pure function: its replica rank and world size, the
max step and who is at it, the store its process group uses, whether it heals and from
whom, and whom it sends its state to.

Upstream's rules, which the model keeps as they are:

- participants are ordered by replica id; the *max participants* are those at the max
  step, and the store of group rank ``g``'s process group is that of max participant
  ``g mod len(max participants)`` (the *primary*);
- a participant recovers when it is behind the max step, or, with ``init_sync`` at max
  step 0, when it is not the primary;
- recovering participant number ``i`` (in replica-rank order) heals from up-to-date
  participant ``(i + g) mod len(up to date)``: the ranks of one recovering replica group
  spread over different sources (RFC #343), since each group rank ``g`` shifts the
  assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_sim.protocols.torchft.quorum import Quorum


class NotInQuorum(Exception):
    """The replica is not among the quorum's participants (upstream: NOT_FOUND)."""


@dataclass(frozen=True)
class QuorumResult:
    """One rank's view of a quorum (torchft ``QuorumResult``)."""

    quorum_id: int
    replica_rank: int
    replica_world_size: int
    recover_src_manager_address: str
    recover_src_replica_rank: int | None
    recover_dst_replica_ranks: list[int]
    store_address: str
    max_step: int
    max_replica_rank: int | None
    max_world_size: int
    heal: bool
    commit_failures: int
    replica_ids: list[str] = field(default_factory=list)


def heal_source(i: int, group_rank: int, up_to_date: list[int]) -> int:
    """The up-to-date participant recovering participant number ``i`` heals from, for
    group rank ``group_rank``."""
    return up_to_date[(i + group_rank) % len(up_to_date)]


def compute_quorum_results(replica_id: str, group_rank: int, quorum: Quorum,
                           init_sync: bool = True) -> QuorumResult:
    """Group rank ``group_rank`` of replica ``replica_id``'s view of ``quorum``."""
    parts = sorted(quorum.participants, key=lambda p: p.replica_id)
    ids = [p.replica_id for p in parts]
    if replica_id not in ids:
        raise NotInQuorum(f"replica {replica_id} not participating in returned quorum")
    replica_rank = ids.index(replica_id)
    max_step = max(p.step for p in parts)
    at_max = [p for p in parts if p.step == max_step]
    at_max_ids = [p.replica_id for p in at_max]
    max_replica_rank = at_max_ids.index(replica_id) if replica_id in at_max_ids else None
    primary = at_max[group_rank % len(at_max)]
    force = init_sync and max_step == 0
    recovering = [i for i, p in enumerate(parts)
                  if p.step != max_step or (force and p.replica_id != primary.replica_id)]
    up_to_date = [i for i in range(len(parts)) if i not in set(recovering)]
    sends: dict[int, list[int]] = {}
    src: int | None = None
    for i, dst in enumerate(recovering):
        source = heal_source(i, group_rank, up_to_date)
        sends.setdefault(source, []).append(dst)
        if dst == replica_rank:
            src = source
    return QuorumResult(
        quorum_id=quorum.quorum_id,
        replica_rank=replica_rank,
        replica_world_size=len(parts),
        recover_src_manager_address=parts[src].address if src is not None else "",
        recover_src_replica_rank=src,
        recover_dst_replica_ranks=list(sends.get(replica_rank, [])),
        store_address=primary.store_address,
        max_step=max_step,
        max_replica_rank=max_replica_rank,
        max_world_size=len(at_max),
        heal=src is not None,
        commit_failures=max((p.commit_failures for p in parts), default=0),
        replica_ids=ids,
    )
