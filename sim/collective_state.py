"""The state of the sim's process groups as :class:`~elastic_sim.sim.collectives.CollectiveEngine`
keeps it: a group (:class:`GroupState`), its members (:class:`Member`), each member's calls
(:class:`Entry`), the operations they match into (``_Op``) and an operation's states
(``OPEN`` .. ``BROKEN``). Data only: the engine in :mod:`elastic_sim.sim.collectives` acts on it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from elastic_sim.protocols.api import Negotiation
from elastic_sim.sim.host import SimProcess
from elastic_sim.sim.kernel import Call, Kernel
from elastic_sim.sim.network import Path
from elastic_sim.sim.store import StoreServer
from elastic_sim.sim.tasks import Pending

OPEN, SCHEDULED, BLOCKED, DONE, BROKEN = range(5)


class Member:
    """One rank of a group: its process, its timeout, its sequence number, its calls."""

    def __init__(self, group: GroupState, rank: int, proc: SimProcess, timeout: float) -> None:
        self.group = group
        self.rank = rank
        self.proc = proc
        self.timeout = timeout
        self.seq = 0
        self.aborted = False
        self.abort_reason = "aborted"
        self.dead = False
        self.died_at = 0.0
        self.pending: dict[int, Entry] = {}


class Entry(Pending[Any]):
    """One call of one member: awaited by the member's task for the result."""

    __slots__ = ("arg", "deadline", "kind", "member", "name", "nbytes", "op", "peer", "root",
                 "t")

    def __init__(self, kernel: Kernel, member: Member, kind: str, arg: Any, nbytes: int) -> None:
        super().__init__(kernel)
        self.member = member
        self.kind = kind
        self.arg = arg
        self.nbytes = nbytes
        self.root = -1
        self.peer = -1
        self.t = kernel.now
        self.deadline: Call | None = None
        self.op: _Op | None = None
        self.name = ""
        """What a negotiated group matches besides the op (Horovod's tensor name)."""


class _Op:
    def __init__(self, uid: int, group: GroupState, seq: int, members: list[Member]) -> None:
        self.uid = uid
        self.group = group
        self.seq = seq
        self.members = members
        self.entries: dict[int, Entry] = {}
        self.state = OPEN
        self.cost = 0.0
        self.hung = False
        """A collective fault hung it: it never completes, whatever the group."""


class GroupState:
    """One process group (one name on one store) as the engine sees it."""

    def __init__(self, server: StoreServer, name: str, size: int, uid: int,
                 negotiation: Negotiation | None = None) -> None:
        self.server = server
        self.negotiation = negotiation
        """Set for a group whose collectives are negotiated by name (a stall, not a
        timeout, when members differ or one has not entered yet)."""
        self.name = name
        self.size = size
        self.members: list[Member | None] = [None] * size
        self.init = _Op(uid, self, -1, [])
        self.formed = False
        self.ops: dict[int, _Op] = {}
        self.p2p: dict[int, _Op] = {}
        self.sends: dict[tuple[int, int], deque[Entry]] = {}
        self.recvs: dict[tuple[int, int], deque[Entry]] = {}
        self.dead_at: float | None = None
        self.dead_rank = -1
        """The first member to die: every failure its death causes names it."""
        self.detect: list[tuple[bool, float]] = []
        self.path: Path | None = None
        self.pending: dict[int, Entry] = {}
        """Every member's calls that have not finished, in entry order."""

    @property
    def label(self) -> str:
        """A stable name for this group in the run (store address, incarnation, name)."""
        return f"{self.server.addr}#{self.server.uid}/{self.name}"
