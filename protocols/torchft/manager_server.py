"""A replica group's Manager server (src/manager.rs ``Manager``), which lives in the
process of the group's rank 0: it heartbeats to the Lighthouse, gathers a quorum request
from every rank of the group before asking the Lighthouse once for all of them, answers
each rank with its own view of the quorum (:func:`.results.compute_quorum_results`),
gathers the ranks' should_commit votes (the step commits only if every rank votes yes),
and tells a recovering peer where this group's checkpoint servers are.

Upstream's rules it keeps:

- the member it sends to the Lighthouse is the last arriving rank's request (its step,
  shrink_only and commit failures);
- a Lighthouse request that fails is retried ``quorum_retries`` times (0 by default) and
  then given up *without answering the ranks*: they wait out their own timeout;
- a rank's request is answered by the first quorum the server gets after the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from elastic_sim.protocols.api import Message, Runtime
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.protocols.torchft.quorum import Quorum, QuorumMember
from elastic_sim.protocols.torchft.results import NotInQuorum, compute_quorum_results
from elastic_sim.protocols.torchft.rpc import Endpoint, RpcError, RpcTimeout, address, tell

RETRY_SLEEP = 0.1
"""Seconds before retrying a Lighthouse request that timed out (src/manager.rs); one that
failed waits ``max(0.1, timeout / (quorum_retries + 1))``."""


class ManagerStartError(Exception):
    """The Manager server could not reach the Lighthouse within ``connect_timeout``."""


@dataclass
class _Request:
    """A rank's request waiting for the server's next answer."""

    msg: Message
    group_rank: int
    deadline: float
    init_sync: bool = True


def quorum_request(group_rank: int, step: int, metadata: str, shrink_only: bool,
                   commit_failures: int, init_sync: bool) -> dict[str, Any]:
    """A rank's quorum request (``ManagerClient._quorum``'s arguments)."""
    return {"group_rank": group_rank, "step": step, "checkpoint_metadata": metadata,
            "shrink_only": shrink_only, "commit_failures": commit_failures,
            "init_sync": init_sync}


def member_of(replica_id: str, address: str, store_address: str, world_size: int,
              request: Mapping[str, Any]) -> QuorumMember:
    """The member a Manager server asks the Lighthouse with: its own identity, and the
    step, shrink_only and commit failures of ``request``, its last rank's."""
    return QuorumMember(replica_id, address, store_address, int(request["step"]),
                        world_size, bool(request["shrink_only"]),
                        int(request["commit_failures"]))


class ManagerServer:
    """One replica group's server, served on a port of its rank 0's endpoint."""

    def __init__(self, rt: Runtime, ep: Endpoint, knobs: TorchFTKnobs, replica_id: str,
                 lighthouse: str, store_address: str, world_size: int) -> None:
        self.rt = rt
        self.ep = ep
        self.knobs = knobs
        self.replica_id = replica_id
        self.lighthouse = lighthouse
        self.store_address = store_address
        self.world_size = world_size
        self.port = rt.rng.randrange(30000, 60000)  # bound to port 0: any free one
        self.address = address(rt.name, self.port)
        self.metadata: dict[int, str] = {}
        self.participants: dict[int, QuorumMember] = {}
        self.waiting: list[_Request] = []
        self.votes: set[int] = set()
        self.failures: set[int] = set()
        self.voters: list[Message] = []
        for method, handler in (("mgr_quorum", self._quorum),
                                ("mgr_should_commit", self._should_commit),
                                ("mgr_checkpoint_metadata", self._checkpoint_metadata)):
            ep.serve(self.port, method, handler)

    async def start(self) -> None:
        """Reach the Lighthouse (src/net.rs ``connect``, retried until
        ``connect_timeout``), then heartbeat to it in the background."""
        try:
            await self.ep.call(self.lighthouse, "lh_connect", {}, self.knobs.connect_timeout)
        except RpcError as exc:
            raise ManagerStartError(f"failed to connect to the lighthouse: {exc}") from None
        self.rt.spawn(self._heartbeats(), "manager.heartbeat")

    async def _heartbeats(self) -> None:
        while True:
            tell(self.rt, self.lighthouse, "lh_heartbeat", {"replica_id": self.replica_id})
            await self.rt.sleep(self.knobs.heartbeat_interval)

    # -- quorum --------------------------------------------------------------------------

    def _quorum(self, msg: Message) -> None:
        b = msg.body
        rank = int(b["group_rank"])
        self.metadata[rank] = str(b["checkpoint_metadata"])
        member = member_of(self.replica_id, self.address, self.store_address,
                           self.world_size, b)
        self.participants[rank] = member
        self.waiting.append(_Request(msg, rank, self.ep.deadline(msg), bool(b["init_sync"])))
        if len(self.participants) == self.world_size:
            self.participants.clear()
            self.rt.spawn(self._run_quorum(member, float(b["timeout"])), "manager.quorum")

    async def _run_quorum(self, member: QuorumMember, timeout: float) -> None:
        """Ask the Lighthouse (with upstream's retries); answer every waiting rank."""
        retries = self.knobs.quorum_retries
        for attempt in range(retries + 1):
            try:
                reply = await self.ep.call(self.lighthouse, "lh_quorum",
                                           {"member": member.to_json()}, timeout)
            except RpcTimeout:
                pause = RETRY_SLEEP
            except RpcError:
                pause = max(RETRY_SLEEP, timeout / max(retries + 1, 1))
            else:
                self._broadcast(Quorum.from_json(reply["quorum"]))
                return
            self.rt.record("mgr_quorum_failed", replica_id=self.replica_id, attempt=attempt)
            if attempt < retries:
                await self.rt.sleep(pause)
        # upstream gives up without broadcasting: the ranks wait out their own timeout

    def _broadcast(self, quorum: Quorum) -> None:
        now = self.rt.monotonic()
        waiting, self.waiting = self.waiting, []
        for req in waiting:
            if req.deadline <= now:
                continue
            try:
                res = compute_quorum_results(self.replica_id, req.group_rank, quorum,
                                             req.init_sync)
            except NotInQuorum as exc:
                self.ep.answer(req.msg, {"error": str(exc)})
                continue
            self.ep.answer(req.msg, {"result": asdict(res)})

    # -- should_commit -------------------------------------------------------------------

    def _should_commit(self, msg: Message) -> None:
        if self.knobs.broken_own_vote:
            self.ep.answer(msg, {"should_commit": bool(msg.body["should_commit"])})
            return
        rank = int(msg.body["group_rank"])
        if not msg.body["should_commit"]:
            self.failures.add(rank)
        self.votes.add(rank)
        self.voters.append(msg)
        if len(self.votes) == self.world_size:
            decision = not self.failures
            voters, self.voters = self.voters, []
            self.votes.clear()
            self.failures.clear()
            for voter in voters:
                self.ep.answer(voter, {"should_commit": decision})

    def _checkpoint_metadata(self, msg: Message) -> None:
        rank = int(msg.body["rank"])
        if rank in self.metadata:
            self.ep.answer(msg, {"checkpoint_metadata": self.metadata[rank]})
        else:
            self.ep.answer(msg, {"error": "rank not found"})

