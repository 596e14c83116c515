"""Process groups: collectives matched by sequence number, priced by an alpha-beta model,
failed by a member's death and timed out by hangs, cuts and mismatches.

- Creating a group is a rendezvous (an ``init`` collective priced as a barrier): it
  completes when all ``size`` ranks of ``name`` on the same store have joined.
- A collective (allreduce, broadcast, barrier) is matched by the members' own sequence
  numbers; it completes when every member has entered the same one, at the last entry plus
  its cost, provided every member runs (not paused) and all can reach each other; else it
  waits until they can again. Point-to-point send/recv pairs match per (src, dst), FIFO.
- A member dies (its process ends, or it calls ``abort``): at the first death, each rank
  draws a detection latency from the group's own random stream (with probability
  ``detect_slow_prob`` the full group timeout, else uniform(0, ``detect_fast_max``)); each
  survivor's pending and later collectives fail with CollectiveFailed at
  ``max(entry, death + its latency)`` unless their own timeout comes first; the failure
  names the first dead member's rank (``peer``).
- Every entry times out with CollectiveTimeout at ``entry + timeout`` unless it completed or
  failed before; ops that do not match (op, root, length) never complete.
- A member whose GPU wedged (:mod:`elastic_sim.sim.heartbeat`) never takes part again: its
  groups' collectives wait for it, and time out, as for a hung peer.
- A negotiated group (:class:`~elastic_sim.protocols.api.Negotiation`, Horovod's controller)
  matches names too, and a collective that does not match, or that a member has not
  entered yet, stalls instead of timing out while every member runs and can be reached
  (:mod:`elastic_sim.sim.collective_stalls`).

Costs (W members; latency and bandwidth: max path latency and min path bandwidth between the
members' hosts): ring allreduce ``2(W-1)(alpha+lat) + 2(W-1)/W * n/bw``; flat broadcast
``(W-1)(alpha + lat + n/bw)``; barrier ``2*ceil(log2 W)*(alpha+lat)``; p2p
``alpha + lat + n/bw`` on the pair's path.

The groups' state (:class:`Member`, :class:`Entry`, :class:`GroupState`) is
:mod:`elastic_sim.sim.collective_state`; failing, timing out and aborting calls is
:class:`~elastic_sim.sim.collective_failures.CollectiveFailures`, a mixin of
:class:`CollectiveEngine`, as are the stall inspector
(:mod:`elastic_sim.sim.collective_stalls`) and NCCL's heartbeat monitor
(:mod:`elastic_sim.sim.heartbeat`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api import CollectiveFailed, Negotiation
from elastic_sim.sim.collective_failures import CollectiveFailures
from elastic_sim.sim.collective_stalls import CollectiveStalls
from elastic_sim.sim.collective_state import (
    BLOCKED,
    BROKEN,
    DONE,
    OPEN,
    SCHEDULED,
    Entry,
    GroupState,
    Member,
    _Op,
)
from elastic_sim.sim.group import SimGroup, op_results, same_op
from elastic_sim.sim.heartbeat import HeartbeatMonitors
from elastic_sim.sim.host import SimProcess
from elastic_sim.sim.kernel import Kernel
from elastic_sim.sim.network import Network
from elastic_sim.sim.store import StoreServer

if TYPE_CHECKING:
    from elastic_sim.sim.stretch import StretchBook
from elastic_sim.world import CollectiveModel

__all__ = ["CollectiveEngine", "Entry", "GroupState", "Member", "broadcast_seconds"]
"""What this module offers (the group state is re-exported from
:mod:`elastic_sim.sim.collective_state`)."""


class CollectiveEngine(CollectiveFailures, CollectiveStalls, HeartbeatMonitors):
    """Matches, prices, completes and fails the collectives of every group of a run."""

    def __init__(self, kernel: Kernel, network: Network, model: CollectiveModel, seed: int):
        self.k = kernel
        self.net = network
        self.model = model
        self.seed = seed
        self.groups: dict[tuple[int, str], GroupState] = {}
        self.blocked: dict[int, _Op] = {}
        self._uid = 0
        self.stretches: StretchBook | None = None
        """Fast training stretches (:mod:`elastic_sim.sim.stretch`); None: every step is
        simulated."""
        self.injected: dict[str, deque[str]] = {}
        """Collective faults waiting for the next collective entered on a host."""
        self.kill: Callable[[SimProcess, int, str], None] | None = None
        """Ends a process at once (the cluster's): how a watchdog that tears its process
        down acts (:attr:`CollectiveModel.tears_down`), and NCCL's heartbeat monitor
        (:mod:`elastic_sim.sim.heartbeat`); None: errors are raised instead."""
        self.on_gpus = False
        """Whether the groups are on GPUs (``cluster.device: cuda``): their processes run
        NCCL's heartbeat monitor, and their GPU can wedge."""

    def inject(self, host: str, mode: str) -> None:
        """The next collective a member on ``host`` enters fails there ("fail": it aborts,
        its peers see it die) or never completes ("hang": every member times out)."""
        if mode not in ("fail", "hang"):
            raise ValueError(f"collective fault mode {mode!r}: expected 'fail' or 'hang'")
        self.injected.setdefault(host, deque()).append(mode)

    def _next_uid(self) -> int:
        self._uid += 1
        return self._uid

    # -- joining -----------------------------------------------------------------------

    async def join(
        self, proc: SimProcess, server: StoreServer, name: str, rank: int, size: int,
        timeout: float, negotiation: Negotiation | None = None,
    ) -> SimGroup:
        """Rendezvous of ``size`` ranks on group ``name`` of ``server``'s store (the first
        to join says whether it is negotiated)."""
        if size < 1 or not 0 <= rank < size:
            raise ValueError(f"group {name}: rank {rank} not in [0, {size})")
        if timeout <= 0:
            raise ValueError(f"group {name}: timeout must be positive")
        if not server.alive:
            raise CollectiveFailed(f"group {name}: store {server.addr} is gone")
        key = (server.uid, name)
        g = self.groups.get(key)
        if g is None:
            g = GroupState(server, name, size, self._next_uid(), negotiation)
            self.groups[key] = g
            server.on_death.append(lambda: self._store_died(g))
        elif g.size != size:
            raise ValueError(f"group {name}: size {size} differs from {g.size}")
        m = Member(g, rank, proc, timeout)
        e = self._entry(m, "init", None, 0)
        if not g.formed and g.members[rank] is None:  # else: never matched, times out
            g.members[rank] = m
            proc.on_death.append(lambda: self._vanished(m) if proc.host.powered_off
                                 else self._died(m))
            e.op = g.init
            g.init.entries[rank] = e
            if g.dead_at is not None:
                self._fail_later(e, g.dead_at, g.dead_rank)
            elif g.init.state == OPEN and len(g.init.entries) == size:
                g.init.members = [x for x in g.members if x is not None]
                g.init.cost = self._cost(g, "barrier", 0)
                self._try(g.init)
        await e
        return SimGroup(self, m)

    def _store_died(self, g: GroupState) -> None:
        if g.formed:
            return
        g.init.state = BROKEN
        self.blocked.pop(g.init.uid, None)
        self._settle_all((e, None, CollectiveFailed(f"group {g.name}: store {g.server.addr} "
                                                    "is gone"))
                         for e in list(g.init.entries.values()))

    # -- entering ----------------------------------------------------------------------

    def _entry(self, m: Member, kind: str, arg: Any, nbytes: int) -> Entry:
        e = Entry(self.k, m, kind, arg, nbytes)
        e.deadline = self.k.call_later(m.timeout, self._timeout, e)
        m.pending[id(e)] = e
        m.group.pending[id(e)] = e
        return e

    def collective(self, m: Member, kind: str, arg: Any, nbytes: int, root: int = -1,
                   name: str = "") -> Entry:
        """Enter the member's next collective; await the returned entry for the result."""
        g = m.group
        seq = m.seq
        m.seq += 1
        e = self._entry(m, kind, arg, nbytes)
        e.root = root
        e.name = name
        op = self._join_op(g, seq, e)
        if g.dead_at is not None:
            op.state = BROKEN
            self._fail_later(e, g.dead_at, g.dead_rank)
        elif op.state == OPEN and len(op.entries) == g.size:
            first = next(iter(op.entries.values()))
            by_name = g.negotiation is not None
            if all(same_op(first, x, by_name) for x in op.entries.values()):
                op.cost = self._cost(g, kind, nbytes)
                self._try(op)
            else:
                op.state = BROKEN
        if self.injected:
            self._apply_injected(m, op)
        return e

    def backdated(self, m: Member, seq: int, vals: list[float], t: float, cost: float
                  ) -> Entry:
        """``m``'s allreduce number ``seq``, entered at ``t`` (before now) with its deadline
        at ``t + timeout``; once every member has one, it completes at ``t + cost``, as an
        entry made at ``t`` would (a split stretch's open step, :mod:`elastic_sim.sim.stretch`)."""
        g = m.group
        e = Entry(self.k, m, "allreduce", vals, 8 * len(vals))
        e.t = t
        e.deadline = self.k.call_exactly(max(t + m.timeout, self.k.now), self._timeout, e)
        m.pending[id(e)] = e
        g.pending[id(e)] = e
        m.seq = seq + 1
        op = self._join_op(g, seq, e)
        if op.state == OPEN and len(op.entries) == g.size:
            op.cost = cost
            if self._ready(op):
                op.state = SCHEDULED
                self.k.call_exactly(t + cost, self._complete, op)
            else:
                op.state = BLOCKED
                self.blocked[op.uid] = op
        return e

    def _join_op(self, g: GroupState, seq: int, e: Entry) -> _Op:
        """Group ``g``'s collective number ``seq`` (made on first entry), with ``e`` in it."""
        op = g.ops.get(seq)
        if op is None:
            op = _Op(self._next_uid(), g, seq, [x for x in g.members if x is not None])
            g.ops[seq] = op
        op.entries[e.member.rank] = e
        e.op = op
        return op

    def paths_changed(self) -> None:
        """Link delays changed: price later collectives on the new paths."""
        for g in self.groups.values():
            g.path = None

    def _apply_injected(self, m: Member, op: _Op) -> None:
        queue = self.injected.get(m.proc.host.name)
        if not queue:
            return
        how = queue.popleft()  # the collective fault's mode
        if how == "hang":
            op.state = BROKEN  # never completes: every member's timeout fires
            op.hung = True
            self.blocked.pop(op.uid, None)
        else:
            self.k.soon(self.abort, m)

    def p2p(self, m: Member, kind: str, peer: int, arg: Any, nbytes: int) -> Entry:
        """Enter a point-to-point send or recv with rank ``peer``."""
        g = m.group
        if not 0 <= peer < g.size or peer == m.rank:
            raise ValueError(f"group {g.name}: bad peer rank {peer}")
        e = self._entry(m, kind, arg, nbytes)
        e.peer = peer
        pm = g.members[peer]
        assert pm is not None
        if pm.dead:
            self._fail_later(e, pm.died_at, peer)
            return e
        pair = (m.rank, peer) if kind == "send" else (peer, m.rank)
        mine, theirs = (g.sends, g.recvs) if kind == "send" else (g.recvs, g.sends)
        q = theirs.get(pair)
        while q and q[0].done:
            q.popleft()
        if not q:
            mine.setdefault(pair, deque()).append(e)
            return e
        other = q.popleft()
        send, recv = (e, other) if kind == "send" else (other, e)
        src, dst = g.members[pair[0]], g.members[pair[1]]
        assert src is not None and dst is not None
        op = _Op(self._next_uid(), g, -1, [src, dst])
        op.entries = {pair[0]: send, pair[1]: recv}
        send.op = recv.op = op
        g.p2p[op.uid] = op
        if len(send.arg) != recv.nbytes:
            op.state = BROKEN
            return e
        lat, bw = self.net.path(src.proc.host.name, dst.proc.host.name)
        op.cost = self.model.alpha + lat + recv.nbytes / bw
        self._try(op)
        return e

    # -- completing --------------------------------------------------------------------

    def _ready(self, op: _Op) -> bool:
        hosts = []
        for m in op.members:
            if m.dead or m.aborted or not m.proc.runnable or m.proc.gpu_wedged:
                return False
            hosts.append(m.proc.host.name)
        if op is op.group.init:
            srv = op.group.server
            if not srv.alive or not srv.owner.runnable:
                return False
            hosts.append(srv.host.name)
        return self.net.all_reachable(hosts)

    def _try(self, op: _Op) -> None:
        if op.state in (DONE, BROKEN):
            self.blocked.pop(op.uid, None)
            return
        if not self._ready(op):
            op.state = BLOCKED
            self.blocked[op.uid] = op
            return
        self.blocked.pop(op.uid, None)
        op.state = SCHEDULED
        self.k.call_later(op.cost, self._complete, op)

    def recheck(self) -> None:
        """Members may run or reach each other again: retry blocked collectives."""
        for op in list(self.blocked.values()):
            self._try(op)

    def _complete(self, op: _Op) -> None:
        if op.state != SCHEDULED:
            return
        if not self._ready(op):
            op.state = BLOCKED
            self.blocked[op.uid] = op
            return
        op.state = DONE
        g = op.group
        results = op_results(op.entries)
        if op is g.init:
            g.formed = True
            self._formed(g)
            self._monitors_start(g)
        elif op.seq >= 0:
            g.ops.pop(op.seq, None)
        else:
            g.p2p.pop(op.uid, None)
        self._settle_all((op.entries[rank], results[rank], None) for rank in sorted(op.entries))

    # -- costs -------------------------------------------------------------------------

    def _cost(self, g: GroupState, kind: str, n: int) -> float:
        w = g.size
        if w <= 1:
            return 0.0
        if g.path is None:
            g.path = self.net.group_path(
                x.proc.host.name for x in g.members if x is not None
            )
        lat, bw = g.path
        a = self.model.alpha
        if kind == "allreduce":
            return 2 * (w - 1) * (a + lat) + 2 * (w - 1) / w * n / bw
        if kind == "broadcast":
            return (w - 1) * (a + lat + n / bw)
        return 2 * (w - 1).bit_length() * (a + lat)  # barrier: 2 * ceil(log2 W) steps


def broadcast_seconds(algorithm: str, w: int, nbytes: int, alpha: float, lat: float,
                      bw: float, chunk_bytes: int) -> float:
    """The alpha-beta time of a payload broadcast to ``w`` members (after its size header)
    by ``algorithm`` (:mod:`elastic_sim.protocols.broadcast`): ``group`` is the flat broadcast
    above; ``tree`` is ``ceil(log2 W)`` full-payload sends; ``chain`` is ``W - 2 + C`` sends of
    one chunk for C chunks (what the sim's point-to-point costs add up to)."""
    if w <= 1 or nbytes <= 0:
        return 0.0
    if algorithm == "group":
        return (w - 1) * (alpha + lat + nbytes / bw)
    if algorithm == "tree":
        return (w - 1).bit_length() * (alpha + lat + nbytes / bw)
    if algorithm == "chain":
        chunks = -(-nbytes // chunk_bytes)
        return (w - 2 + chunks) * (alpha + lat + min(chunk_bytes, nbytes) / bw)
    raise ValueError(f"unknown broadcast algorithm {algorithm!r}")
