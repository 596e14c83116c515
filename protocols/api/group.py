"""Process groups, one per membership epoch: what a runtime implements (:class:`Group`) and
what protocols hold (:class:`TracedGroup`), whose collectives are traced and numbered the
same way in both runtimes."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api.concurrency import T, Task
from elastic_sim.protocols.api.errors import CollectiveError
from elastic_sim.protocols.api.message import JSON

if TYPE_CHECKING:  # the runtime builds TracedGroups: importing it here would be a cycle
    from elastic_sim.protocols.api.runtime import Runtime

Received = bytes | bytearray | memoryview
"""Bytes a member receives from a broadcast or a recv: a runtime may hand over the buffer
the transport filled (a bytearray, a memoryview) instead of copying it into bytes."""
Sendable = bytes | bytearray | memoryview
"""Bytes a member sends: a view of a larger buffer travels without a copy."""


@dataclass(frozen=True)
class Negotiation:
    """A group whose collectives a controller negotiates by name before they run (Horovod's
    controller): a collective runs once every member has submitted one of the same name;
    members that submit different names, or a member that has not submitted yet while it
    runs and can be reached, wait without the group timeout (a stall), which applies only
    where a member cannot take part (dead, frozen, cut off) and to the group's creation.
    A stall inspector on rank 0 looks at the first controller cycle (``cycle_s``) past
    every ``stall_check_s`` seconds and reports the collectives some members have waited on
    for longer than that; with ``stall_shutdown_s`` (0: never; ignored below
    ``stall_check_s``) it shuts the group down once one waited longer, failing every
    member's calls."""

    stall_check_s: float = 60.0
    stall_shutdown_s: float = 0.0
    stall_check: bool = True
    cycle_s: float = 0.001


class Group(abc.ABC):
    """A process group of one membership epoch (Gloo semantics).

    A collective completes only when every member has entered the same one (matched by
    the group's sequence number); it raises :class:`CollectiveFailed` when a member died
    (each survivor notices after its own detection latency) and :class:`CollectiveTimeout`
    when a member hangs or is cut off. Payloads are bytes and float lists so the sim needs
    no torch; the real runtime moves them as tensors. What a member receives is a buffer
    (:data:`Received`: the real runtime hands over the memory Gloo filled, a memoryview):
    read it as bytes-like (``bytes(got)`` where ``bytes`` methods are needed).
    """

    name: str
    rank: int
    size: int

    @abc.abstractmethod
    async def _allreduce(self, values: list[float], name: str = "") -> list[float]:
        """Element-wise sum over members. ``name`` matters only in a negotiated group
        (:class:`Negotiation`): members must submit the same name."""

    @abc.abstractmethod
    async def _broadcast(self, data: bytes, root: int, name: str = "") -> Received:
        """Root's ``data`` to everyone; every member passes a buffer of the same length."""

    @abc.abstractmethod
    async def _barrier(self, name: str = "") -> None:
        """Return when every member has entered."""

    @abc.abstractmethod
    async def _send(self, dst: int, data: Sendable) -> None:
        """Point-to-point send to rank ``dst``."""

    @abc.abstractmethod
    async def _recv(self, src: int, nbytes: int) -> Received:
        """Point-to-point receive of exactly ``nbytes`` from rank ``src``."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Fail every pending and future collective of this member with CollectiveFailed."""


def blamed(exc: CollectiveError) -> dict[str, int]:
    """The trace field naming the peer a collective failure blamed (none if unknown)."""
    peer = getattr(exc, "peer", None)
    return {} if peer is None else {"peer": int(peer)}


@dataclass
class StretchResult:
    """What a runtime's fast ``train`` (:meth:`TracedGroup.train`) hands back: the sums of
    the steps it ran (``apply`` them in order), then, if steps remain, either the next
    step's allreduce already entered (``entry``: await its result) or its compute done
    (``slept``), or neither (go on step by step)."""

    sums: list[list[float]] = field(default_factory=list)
    entry: Awaitable[list[float]] | None = None
    slept: bool = False


class TracedGroup:
    """What protocols hold: a :class:`Group` whose collectives are traced identically in
    both runtimes (``coll_enter`` / ``coll_done`` / ``coll_fail``) and numbered."""

    def __init__(self, rt: Runtime, inner: Group) -> None:
        self._rt = rt
        self._inner = inner
        self.name = inner.name
        self.rank = inner.rank
        self.size = inner.size
        self.seq = 0

    async def _traced(self, op: str, nbytes: int, aw: Awaitable[T], entered: bool = False,
                      name: str = "") -> T:
        seq = self.seq
        self.seq += 1
        if entered:  # its coll_enter is in a train_steps summary
            pass
        elif name:
            self._rt.record("coll_enter", group=self.name, seq=seq, op=op, nbytes=nbytes,
                            name=name)
        else:
            self._rt.record("coll_enter", group=self.name, seq=seq, op=op, nbytes=nbytes)
        try:
            out = await aw
        except CollectiveError as exc:
            self._rt.record("coll_fail", group=self.name, seq=seq, op=op,
                            error=type(exc).__name__, **blamed(exc))
            raise
        self._rt.record("coll_done", group=self.name, seq=seq, op=op)
        return out

    async def allreduce(self, values: Sequence[float], name: str = "") -> list[float]:
        """Element-wise sum over members (``name``: what a negotiated group matches)."""
        vals = list(values)
        return await self._traced("allreduce", 8 * len(vals),
                                  self._inner._allreduce(vals, name), name=name)

    async def train(self, count: int, step_time: float, grads: Callable[[int], list[float]],
                    apply: Callable[[int, list[float]], None], first: int, *,
                    trace_step: bool = True, marks: Sequence[int] = (),
                    at_mark: Callable[[int], None] | None = None, **fields: JSON) -> None:
        """``count`` training steps, each ``sleep(step_time)`` (the compute) then an
        allreduce of ``grads(i)``, then ``apply(i, summed)`` and a ``step`` event
        (``fields`` and ``step=first + i``; none where ``trace_step`` is False: a member
        whose steps another member traces), then, for ``i`` in ``marks``, ``at_mark(i)``:
        what the member does at that step's end that touches no other member and awaits
        nothing (a torchelastic worker sends its agent a checkpoint). :class:`CollectiveError`
        after ``apply`` of the steps done. Every member calls it with the same ``count``,
        ``step_time`` and ``marks``.

        This is the loop below in every runtime, except that the sim at its default
        fidelity (``fast``) runs a lockstep stretch of the members as one event and traces
        it as one ``train_steps`` summary per mark (:mod:`elastic_sim.sim.stretch`), with the same
        times and results, splitting it where anything touches the run."""
        fast = getattr(self._inner, "_train", None)
        step_fields = fields if trace_step else None
        marked = tuple(sorted(set(marks))) if at_mark is not None else ()
        due = frozenset(marked)
        k = 0  # steps applied
        while k < count:
            slept = False
            if fast is not None:
                k, slept = await self._stretch(fast, k, count, step_time, grads, apply, first,
                                               step_fields, marked, due, at_mark)
                if k >= count:
                    break
                # split or not taken: step by step up to the next mark (a stretch may
                # start again after it, as a train from there would)
                end = next((m + 1 for m in marked if m >= k), count)
            else:
                end = count
            await self.steps(k, end, step_time, grads, apply, first, step_fields, slept,
                             due, at_mark)
            k = end

    async def _stretch(self, fast: Any, k0: int, count: int, step_time: float,
                       grads: Callable[[int], list[float]],
                       apply: Callable[[int, list[float]], None], first: int,
                       fields: Mapping[str, JSON] | None, marked: tuple[int, ...],
                       due: frozenset[int], at_mark: Callable[[int], None] | None
                       ) -> tuple[int, bool]:
        """Steps ``k0..`` through the runtime's fast path: the next step not applied, and
        whether its compute is done already."""
        k = k0

        def reached(i: int, sums: list[list[float]]) -> None:
            """The runtime ran on through mark ``k0 + i``: apply the steps to it, act."""
            nonlocal k
            for summed in sums:
                apply(k, summed)
                k += 1
                self.seq += 1
            assert at_mark is not None and k == k0 + i + 1
            at_mark(k0 + i)

        rel = tuple(m - k0 for m in marked if m >= k0)
        out: StretchResult = await fast(count - k0, step_time, lambda i: grads(k0 + i),
                                        first + k0, fields, rel, reached if rel else None)
        for summed in out.sums:  # the steps since the last mark (the last step's included)
            apply(k, summed)
            self.seq += 1
            if k in due and at_mark is not None:
                at_mark(k)
            k += 1
        if out.entry is None:
            return k, out.slept
        # inside step k's allreduce (its coll_enter is traced)
        summed = await self._traced("allreduce", 8 * len(grads(k)), out.entry, True)
        apply(k, summed)
        if fields is not None:
            self._rt.record("step", **fields, step=first + k)
        if k in due and at_mark is not None:
            at_mark(k)
        return k + 1, False

    async def steps(self, start: int, count: int, step_time: float,
                    grads: Callable[[int], list[float]],
                    apply: Callable[[int, list[float]], None], first: int,
                    fields: Mapping[str, JSON] | None, slept: bool = False,
                    marks: Collection[int] = (), at_mark: Callable[[int], None] | None = None
                    ) -> None:
        """Steps ``start..count-1`` of :meth:`train` one by one (``slept``: the first
        step's compute is already done; ``fields`` None: no ``step`` events)."""
        due = frozenset(marks) if at_mark is not None else frozenset()
        for i in range(start, count):
            if not slept:
                await self._rt.sleep(step_time)
            slept = False
            summed = await self.allreduce(grads(i))
            apply(i, summed)
            if fields is not None:
                self._rt.record("step", **fields, step=first + i)
            if i in due:
                assert at_mark is not None
                at_mark(i)

    async def broadcast(self, data: bytes, root: int, name: str = "") -> Received:
        """Root's bytes to all; every member passes a buffer of the same length
        (``name``: what a negotiated group matches)."""
        return await self._traced("broadcast", len(data),
                                  self._inner._broadcast(data, root, name), name=name)

    async def barrier(self, name: str = "") -> None:
        """Return when every member has entered."""
        await self._traced("barrier", 0, self._inner._barrier(name), name=name)

    async def send(self, dst: int, data: Sendable) -> None:
        """Point-to-point send (not numbered: only the two ends take part)."""
        await self._inner._send(dst, data)

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task[T]:
        """Run ``coro`` as a task of this member's process (a send overlapping a recv)."""
        return self._rt.spawn(coro, name)

    async def recv(self, src: int, nbytes: int) -> Received:
        """Point-to-point receive of exactly ``nbytes``."""
        return await self._inner._recv(src, nbytes)

    def abort(self) -> None:
        """Fail this member's pending and future collectives."""
        self._inner.abort()
