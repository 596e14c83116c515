"""A member's face of a process group (:class:`elastic_sim.protocols.api.Group`), and how a
completed collective's results are formed. Matching, pricing and failing live in
:mod:`elastic_sim.sim.collectives`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api import (
    JSON,
    Cancelled,
    CollectiveFailed,
    Group,
    Received,
    Sendable,
    StretchResult,
)

if TYPE_CHECKING:
    from elastic_sim.sim.collectives import CollectiveEngine, Entry, Member


def same_op(a: Entry, b: Entry, by_name: bool = False) -> bool:
    """Whether two members' entries are the same collective (op, root, length; and name,
    ``by_name``: in a negotiated group)."""
    if a.kind != b.kind or (by_name and a.name != b.name):
        return False
    if a.kind == "allreduce":
        return len(a.arg) == len(b.arg)
    if a.kind == "broadcast":
        return a.root == b.root and a.nbytes == b.nbytes
    return True


def op_results(entries: dict[int, Entry]) -> dict[int, Any]:
    """Each rank's result of a completed op (allreduce: sums in rank order)."""
    any_e = next(iter(entries.values()))
    kind = any_e.kind
    if kind == "allreduce":
        ranks = sorted(entries)
        total = list(entries[ranks[0]].arg)
        for r in ranks[1:]:
            for i, x in enumerate(entries[r].arg):
                total[i] += x
        return {r: list(total) for r in ranks}
    if kind == "broadcast":
        data = entries[any_e.root].arg
        return {r: data for r in entries}
    if kind in ("send", "recv"):
        send = next(e for e in entries.values() if e.kind == "send")
        return {r: (None if e.kind == "send" else send.arg) for r, e in entries.items()}
    return {r: None for r in entries}


class SimGroup(Group):
    """What ``Runtime._new_group`` returns: one member's face of a group."""

    def __init__(self, engine: CollectiveEngine, member: Member) -> None:
        self._engine = engine
        self._m = member
        self.name = member.group.name
        self.rank = member.rank
        self.size = member.group.size

    def _check(self) -> None:
        if not self._m.proc.alive:
            raise Cancelled("process is dead")
        if self._m.aborted:
            raise CollectiveFailed(f"group {self.name}: {self._m.abort_reason}")

    async def _train(self, count: int, step_time: float, grads: Callable[[int], list[float]],
                     first: int, fields: Mapping[str, JSON] | None,
                     marks: tuple[int, ...] = (),
                     reached: Callable[[int, list[list[float]]], None] | None = None
                     ) -> StretchResult:
        """:meth:`elastic_sim.protocols.api.TracedGroup.train`'s fast path
        (:mod:`elastic_sim.sim.stretch`)."""
        self._check()
        book = self._engine.stretches
        if book is None:
            return StretchResult()
        proc = self._m.proc
        sleep_s = step_time * proc.host.slowdown + book.wake_latency if step_time > 0.0 else 0.0
        out: StretchResult = await book.arrive(self._m, count, sleep_s, grads, first, fields,
                                               marks, reached)
        return out

    async def _allreduce(self, values: list[float], name: str = "") -> list[float]:
        """Element-wise sum over members (in rank order: deterministic floats)."""
        self._check()
        vals = [float(v) for v in values]
        out: list[float] = await self._engine.collective(self._m, "allreduce", vals,
                                                         8 * len(vals), name=name)
        return out

    async def _broadcast(self, data: bytes, root: int, name: str = "") -> Received:
        """Root's ``data`` to everyone; every member passes a buffer of the same length."""
        self._check()
        if not 0 <= root < self.size:
            raise ValueError(f"group {self.name}: bad root {root}")
        buf = bytes(data)
        out: bytes = await self._engine.collective(self._m, "broadcast", buf, len(buf), root,
                                                   name)
        return out

    async def _barrier(self, name: str = "") -> None:
        """Return when every member has entered."""
        self._check()
        await self._engine.collective(self._m, "barrier", None, 0, name=name)

    async def _send(self, dst: int, data: Sendable) -> None:
        """Point-to-point send to rank ``dst``."""
        self._check()
        buf = bytes(data)
        await self._engine.p2p(self._m, "send", dst, buf, len(buf))

    async def _recv(self, src: int, nbytes: int) -> Received:
        """Point-to-point receive of exactly ``nbytes`` from rank ``src``."""
        self._check()
        out: bytes = await self._engine.p2p(self._m, "recv", src, None, nbytes)
        return out

    def abort(self) -> None:
        """Fail this member's pending and future collectives; the others see it die."""
        self._engine.abort(self._m)
