"""One rank's Manager (torchft/manager.py ``Manager``): the quorum at the start of each
step, reconfiguring the cross-replica process group when the quorum id changes, healing
from a peer at the max step, the fault-tolerant allreduce, and the should_commit vote.

As upstream:

- ``start_quorum`` first waits for the previous step's quorum (its error raises there),
  then runs the next one in the background (``use_async_quorum``) or waits for it;
- a failed reconfiguration, heal or allreduce does not raise: it is *reported*, and the
  step's vote is no (``report_error``); a failed quorum request or should_commit call
  raises, which ends the rank's process;
- a recovering rank takes part in the allreduce with zeros and applies the healed state
  in should_commit, before the vote;
- the step advances only when every rank of the replica group votes yes; a yes needs no
  error and at least ``min_replica_size`` replicas at the max step;
- should_commit then stops this rank's checkpoint server from serving, waiting for the
  transfers under way (a transfer past ``timeout`` raises here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_sim.protocols.api import (
    CollectiveError,
    Runtime,
    Store,
    StoreError,
    Task,
    TracedGroup,
)
from elastic_sim.protocols.static.training import TrainState
from elastic_sim.protocols.torchft.checkpoint import (
    CheckpointError,
    CheckpointServer,
    recv_checkpoint,
)
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.protocols.torchft.manager_server import ManagerServer, quorum_request
from elastic_sim.protocols.torchft.results import QuorumResult
from elastic_sim.protocols.torchft.rpc import Endpoint, RpcError

MANAGER_ADDR_KEY = "manager_addr"

REPLICA_ID_KEY = "replica_id"
"""Keys rank 0 writes to its replica group's store for the other ranks
(torchft/manager.py)."""


@dataclass
class Model:
    """What one rank's training loop holds: its shard of the model (params and step; the
    ranks of a replica group hold different shards) and how many batches of its replica
    group's data it has drawn (its data position)."""

    state: TrainState
    position: int = 0


def replica_host(replica_id: str) -> str:
    """The host of a replica id (``<host>:<uuid>``)."""
    return replica_id.split(":", 1)[0]


class Manager:
    """One rank's Manager (and, on group rank 0, the group's Manager server)."""

    def __init__(self, rt: Runtime, ep: Endpoint, knobs: TorchFTKnobs, model: Model,
                 store: Store, store_address: str, group_rank: int, lighthouse: str,
                 state_bytes: int) -> None:
        self.rt = rt
        self.ep = ep
        self.knobs = knobs
        self.model = model
        self.store = store
        self.store_address = store_address
        self.group_rank = group_rank
        self.lighthouse = lighthouse
        self.ckpt = CheckpointServer(rt, ep, store, store_address, knobs.timeout, state_bytes)
        self.replica_id = ""
        self.manager_addr = ""
        self.step = 0
        self.batches_committed = 0
        self.quorum_id = -1
        self.errored: str | None = None
        self.healing = False
        self.commit_failures = 0
        self.participating_rank: int | None = None
        self.participating_world = 0
        self.result: QuorumResult | None = None
        self.pending: TrainState | None = None
        self.heal_src = ""
        self.healed = False
        """A healed state was applied (the training loop resets this)."""
        self.sync_due = False
        """An up-to-date member of a new quorum, whose state the quorum's first allreduce
        shows shared (every healing member entered it with its state fetched)."""
        self.group: TracedGroup | None = None
        self.quorum: Task[None] | None = None
        self.transfers = 0

    async def start(self) -> None:
        """Rank 0 starts the group's Manager server (a new replica id) and publishes it;
        every rank reads it from the group's store. ManagerStartError or StoreError if
        that fails."""
        if self.group_rank == 0:
            replica_id = f"{self.rt.host}:{self.rt.rng.getrandbits(64):016x}"
            server = ManagerServer(self.rt, self.ep, self.knobs, replica_id, self.lighthouse,
                                   self.store_address, self.knobs.ranks_per_replica)
            await server.start()
            await self.store.set(MANAGER_ADDR_KEY, server.address.encode())
            await self.store.set(REPLICA_ID_KEY, replica_id.encode())
        self.manager_addr = (await self.store.get(MANAGER_ADDR_KEY)).decode()
        self.replica_id = (await self.store.get(REPLICA_ID_KEY)).decode()

    def report_error(self, where: str, exc: BaseException) -> None:
        """Make this step uncommittable (``report_error``), and say why."""
        self.errored = f"{where}: {type(exc).__name__}: {exc}"
        self.rt.record("ft_error", where=where, error=f"{type(exc).__name__}: {exc}")

    # -- quorum --------------------------------------------------------------------------

    async def start_quorum(self) -> None:
        """Ready the next step: wait for the previous quorum, start the next one."""
        if self.quorum is not None:
            await self.quorum
        self.errored = None
        self.healing = False
        self.quorum = self.rt.spawn(self._async_quorum(), "manager.quorum")
        if not self.knobs.use_async_quorum:
            await self.wait_quorum()
            if self.healing:
                await self._apply_pending()
                self.healing = False

    async def wait_quorum(self) -> None:
        """Wait for this step's quorum (and heal); its request's error raises here."""
        assert self.quorum is not None, "must call start_quorum before wait_quorum"
        await self.quorum

    async def _async_quorum(self) -> None:
        knobs = self.knobs
        body = quorum_request(self.group_rank, self.step, self.ckpt.metadata(),
                              knobs.shrink_only, self.commit_failures, knobs.init_sync)
        reply = await self.ep.call(self.manager_addr, "mgr_quorum", body, knobs.quorum_timeout)
        res = QuorumResult(**reply["result"])
        self.result = res
        self.participating_rank, self.participating_world = (
            (res.max_replica_rank, res.max_world_size) if knobs.use_async_quorum
            else (res.replica_rank, res.replica_world_size))
        self.rt.record("ft_quorum", quorum_id=res.quorum_id, replica_id=self.replica_id,
                       group_rank=self.group_rank, replica_rank=res.replica_rank,
                       replica_world_size=res.replica_world_size, step=self.step,
                       max_step=res.max_step, heal=res.heal,
                       src=self._host(res, res.recover_src_replica_rank),
                       dst=list(res.recover_dst_replica_ranks), store=res.store_address,
                       commit_failures=res.commit_failures)
        if res.quorum_id != self.quorum_id:
            self.quorum_id = res.quorum_id
            try:
                await self._configure(res)
            except (StoreError, CollectiveError) as exc:
                self.report_error("configure", exc)
                return
            self.sync_due = not res.heal
        try:
            if res.recover_dst_replica_ranks:
                self.ckpt.send_checkpoint(res.max_step, self.model.state, self.state_dict())
            if res.heal:
                self.healing = True
                await self._heal(res)
        except (RpcError, CheckpointError) as exc:
            self.report_error("heal", exc)

    async def _configure(self, res: QuorumResult) -> None:
        """The cross-replica process group of this group rank for the new quorum, through
        the primary's store under ``torchft/<quorum id>/<group rank>``."""
        if self.group is not None:
            self.group.abort()
            self.group = None
        timeout = self.knobs.pg_timeout
        store = await self.rt.connect_store(res.store_address, timeout)
        prefixed = store.prefixed(f"torchft/{res.quorum_id}/{self.group_rank}")
        self.group = await self.rt.new_group(
            prefixed, f"torchft_rank_{self.group_rank}_quorum_{res.quorum_id}",
            res.replica_rank, res.replica_world_size, timeout)
        self.rt.record("rdzv_done", round=res.quorum_id,
                       members=[replica_host(r) for r in res.replica_ids],
                       rank=res.replica_rank, world_size=res.replica_world_size)

    async def _heal(self, res: QuorumResult) -> None:
        """Fetch the source's state of the max step; it is applied in should_commit."""
        src = res.recover_src_replica_rank
        assert src is not None, "must have a recover rank when healing"
        meta = await self.ep.call(res.recover_src_manager_address, "mgr_checkpoint_metadata",
                                  {"rank": self.group_rank}, self.knobs.timeout)
        self.transfers += 1
        name = f"torchft_ckpt_{self.replica_id}_{self.group_rank}_{self.transfers}"
        state, torchft = await recv_checkpoint(self.rt, self.ep,
                                               str(meta["checkpoint_metadata"]), res.max_step,
                                               name, self.knobs.timeout)
        self.pending = state
        self.heal_src = self._host(res, src) or ""
        self.step = int(torchft["step"])
        self.batches_committed = int(torchft["batches_committed"])
        self.step = res.max_step
        self.rt.record("ft_heal", quorum_id=res.quorum_id, replica_id=self.replica_id,
                       group_rank=self.group_rank, src=self.heal_src, src_replica_rank=src,
                       step=res.max_step, digest=state.digest())

    @staticmethod
    def _host(res: QuorumResult, rank: int | None) -> str | None:
        return None if rank is None else replica_host(res.replica_ids[rank])

    def state_dict(self) -> dict[str, int]:
        """The Manager's own state, healed along with the model's."""
        return {"step": self.step, "batches_committed": self.batches_committed}

    async def _apply_pending(self) -> None:
        """Load the healed state (``_apply_pending_state_dict``)."""
        await self.wait_quorum()
        if self.pending is None:
            assert self.errored, "checkpoint was not staged and no error occurred"
            return
        if not self.knobs.broken_skip_heal:
            self.model.state = self.pending
        self.pending = None
        self.healed = True
        self._record_sync(self.heal_src)

    def _record_sync(self, root: str) -> None:
        """A ``sync`` of group rank 0's shard: the ranks of a replica group hold different
        shards, and a round's syncs are compared with one another."""
        if self.group_rank == 0:
            self.rt.record("sync", round=self.quorum_id, rank=self.result.replica_rank
                           if self.result else 0, root=root, step=self.step,
                           digest=self.model.state.digest())

    # -- the step ------------------------------------------------------------------------

    def is_participating(self) -> bool:
        """Whether this replica's gradients count this step (a healing one's do not)."""
        if self.participating_rank is None:
            return False
        return not (self.healing and self.knobs.use_async_quorum)

    async def allreduce(self, values: list[float]) -> list[float]:
        """The average over the participating replicas; on an error, ``values`` as they
        were (the step is uncommittable then)."""
        if self.errored:
            return values
        await self.wait_quorum()
        n = self.participating_world
        if not self.is_participating():
            values = [0.0] * len(values)
        if self.group is None:
            self.report_error("allreduce", RuntimeError("process group not initialized"))
            return values
        try:
            summed = await self.group.allreduce(values)
        except CollectiveError as exc:
            self.report_error("allreduce", exc)
            return values
        if self.sync_due:
            self.sync_due = False
            self._record_sync(self.rt.host)
        return [v / n for v in summed]

    async def should_commit(self) -> bool:
        """The replica group's vote on this step; the step advances on a yes."""
        await self.wait_quorum()
        if self.healing:
            await self._apply_pending()
        n = self.participating_world
        vote = n >= self.knobs.min_replica_size and self.errored is None
        reply: Mapping[str, Any] = await self.ep.call(
            self.manager_addr, "mgr_should_commit",
            {"group_rank": self.group_rank, "step": self.step, "should_commit": vote},
            self.knobs.timeout)
        decision = bool(reply["should_commit"])
        await self.ckpt.disallow()
        if decision:
            self.step += 1
            self.batches_committed += n
            self.commit_failures = 0
        else:
            self.commit_failures += 1
        self.rt.record("ft_should_commit", quorum_id=self.quorum_id, replica_id=self.replica_id,
                       group_rank=self.group_rank, vote=vote, decision=decision, step=self.step,
                       participants=n, position=self.model.position)
        limit = self.knobs.max_retries
        if not decision and limit is not None and self.commit_failures > limit:
            raise RuntimeError(f"should_commit failed {self.commit_failures} times "
                               f"consecutively, exceeding max_retries={limit}")
        return decision
