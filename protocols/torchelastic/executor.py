"""The state holder (sync, cache, sweep) and the executor loop that applies an op's
action and publishes it with compare-and-set on its next iteration."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from elastic_sim.protocols.torchelastic.backend import C10dBackend
from elastic_sim.protocols.torchelastic.memo import WriteMemo
from elastic_sim.protocols.torchelastic.ops import (
    Action,
    Context,
    Op,
    RendezvousClosedError,
    RendezvousStateError,
    RendezvousTimeoutError,
    apply,
)
from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
    expired_nodes,
    sweep,
)

SYNC_DELAY = 1.0
"""Seconds an executor sleeps after a SYNC action before polling again."""


class Clock(Protocol):
    """The two clocks of a node: monotonic seconds and wall-clock microseconds."""

    def monotonic(self) -> float:
        """Monotonic seconds."""
        ...

    def now_us(self) -> int:
        """Wall clock, microseconds."""
        ...


@dataclass(frozen=True)
class CodecCost:
    """CPU seconds one encode (``pickle.dumps`` + base64) or one decode (the reverse) of
    the rendezvous state costs upstream: ``base + per_node * nodes``, nodes being those
    with a heartbeat entry (every participant, waiting and redundant node). The model
    keeps the state as JSON and charges this instead (:meth:`Runtime.spend`)."""

    base: float = 0.0
    per_node: float = 0.0

    def of(self, state: RendezvousState) -> float:
        """Seconds to encode or decode ``state``."""
        return self.base + self.per_node * len(state.last_heartbeats)


FREE = CodecCost()
"""Encoding and decoding cost nothing (a holder outside a run)."""


async def _free(seconds: float) -> None:
    """No cost: the holder's default ``spend``."""


@dataclass
class WrittenMemos:
    """What the bytes a rendezvous's nodes wrote stand for, shared by the nodes that hand
    each other the very objects they write (:meth:`elastic_sim.protocols.api.Runtime.shared`):
    a stored (base64) value -> its state bytes (:class:`C10dBackend`), and state bytes ->
    the state (:class:`StateHolder`)."""

    values: WriteMemo[bytes] = field(default_factory=WriteMemo)
    states: WriteMemo[RendezvousState] = field(default_factory=WriteMemo)


class StateHolder:
    """The node's copy of the shared state, synced with the backend.

    ``sync`` writes the local state if dirty (compare-and-set with the token of the last
    sync; on a lost race the local edits are dropped), else reads it unless the last
    sync was within ``cache_duration``. After every real sync it sweeps dead nodes by the
    observer's wall clock, locally."""

    def __init__(self, backend: C10dBackend, settings: RendezvousSettings, clock: Clock,
                 cache_duration: float = 1.0,
                 on_completed: Callable[[RendezvousState], None] | None = None,
                 codec: CodecCost = FREE,
                 spend: Callable[[float], Awaitable[None]] = _free,
                 written: WriteMemo[RendezvousState] | None = None) -> None:
        self.on_completed = on_completed
        self.codec = codec
        """What encoding and decoding the state costs (charged through ``spend``)."""
        self.spend = spend
        """Told when this node's write is the one that completed a round (the instant the
        membership is decided), for the trace; upstream has no such hook."""
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.cache_duration = cache_duration
        self.written: WriteMemo[RendezvousState] = WriteMemo() if written is None else written
        """The states behind the bytes this holder wrote (each write is held until it
        settles), and those of the holders it shares the memo with: reading them back is a
        lookup (:meth:`RendezvousState.decode_shared`)."""
        self.state = RendezvousState()
        """The local copy. Possibly shared with other nodes' holders (the decoded store
        value): change it only through :meth:`mutable`."""
        self._shared = False
        self.token: bytes | None = None
        self.dirty = False
        self.last_sync_time = -1.0
        self.dead_nodes: list[NodeDesc] = []
        self.synced_complete = False
        """Whether the state as last read or written was complete."""

    async def sync(self) -> bool | None:
        """True/False: a write was attempted and won/lost; None: a read (or the cache)."""
        bits: bytes | None = None
        token: bytes | None = None
        has_set: bool | None
        completes = False
        if self.dirty:
            await self.spend(self.codec.of(self.state))  # pickle.dumps, before the write
            has_set = False
            completes = self.state.complete and not self.synced_complete
            written = self.state
            data = written.encode()
            self._shared = True  # `written` may become the stored state: copy before changing it
            self.written.hold(data, written)
            resp = None
            try:
                resp = await self.backend.set_state(data, self.token)
            finally:
                self.written.settle(data, resp is not None and resp[2])
            if resp is not None:
                bits, token, has_set = resp
        else:
            has_set = None
            if self.cached():
                return None
            got = await self.backend.get_state()
            if got is not None:
                bits, token = got
        if bits is not None:
            try:
                decoded = RendezvousState.decode_shared(bits, self.written)
            except ValueError as exc:
                raise RendezvousStateError(str(exc)) from exc
            await self.spend(self.codec.of(decoded))  # pickle.loads
            self.state = decoded
            self._shared = True
        else:
            self.state = RendezvousState()
            self._shared = False
        self.token = token
        self.dirty = False
        self.last_sync_time = self.clock.monotonic()
        if has_set and completes and self.on_completed is not None:
            self.on_completed(self.state)
        self.synced_complete = self.state.complete
        self.dead_nodes = expired_nodes(self.state, self.settings, self.clock.now_us())
        if self.dead_nodes:
            sweep(self.mutable(), self.dead_nodes, self.settings)
        return has_set

    def cached(self) -> bool:
        """Whether :meth:`sync` would use the cache now (nothing to write, the last read
        within the cache lifetime): it would return None at once, awaiting nothing."""
        return (not self.dirty and self.cache_duration > 0
                and self.last_sync_time >= max(self.clock.monotonic() - self.cache_duration, 0))

    def cache_expiry(self) -> float:
        """The earliest monotonic reading at which :meth:`cached` turns False by time alone
        (-inf: it is False already or at once): the least float ``m`` with
        ``m - cache_duration > last_sync_time`` in float arithmetic, as :meth:`cached`
        compares."""
        last, life = self.last_sync_time, self.cache_duration
        if self.dirty or life <= 0 or last < 0:
            return -math.inf
        m = last + life
        while m - life > last:
            m = math.nextafter(m, -math.inf)
        while m - life <= last:
            m = math.nextafter(m, math.inf)
        return m

    def mutable(self) -> RendezvousState:
        """The local state, copied first if it is shared (copy on write)."""
        if self._shared:
            self.state = self.state.copy()
            self._shared = False
        return self.state

    def mark_dirty(self) -> None:
        """The next sync writes the local state."""
        self.dirty = True


class Executor:
    """Runs ops for one node: sync, decide, apply, publish on the next iteration."""

    def __init__(self, node: NodeDesc, holder: StateHolder, settings: RendezvousSettings,
                 clock: Clock, delay: Callable[[float], Awaitable[None]]) -> None:
        self.node = node
        self.holder = holder
        self.settings = settings
        self.clock = clock
        self.delay = delay

    async def step(
        self, op: Op, deadline: float, update_deadline: Callable[[float], float] | None = None
    ) -> tuple[Action, float]:
        """One iteration: sync, decide, and apply a mutation locally (marked dirty, so the
        next iteration's sync publishes it). Returns the action and the op deadline (a
        node leaving the redundancy list re-arms it)."""
        await self.holder.sync()
        state = self.holder.state
        ctx = Context(self.node, state, self.settings, self.clock.monotonic(),
                      self.clock.now_us())
        action = op(ctx, deadline)
        if action is Action.ERROR_CLOSED:
            raise RendezvousClosedError()
        if action is Action.ERROR_TIMEOUT:
            raise RendezvousTimeoutError()
        if action in (Action.FINISH, Action.SYNC):
            return action, deadline
        apply(action, self.holder.mutable(), self.node, self.settings, self.clock.now_us())
        if action is Action.REMOVE_FROM_REDUNDANCY_LIST and update_deadline is not None:
            deadline = update_deadline(self.settings.join_timeout)
        self.holder.mark_dirty()
        return action, deadline

    async def run(
        self, op: Op, deadline: float, update_deadline: Callable[[float], float] | None = None
    ) -> None:
        """Iterate until the op finishes; errors propagate. A node that stops right after
        choosing an action has not published it."""
        action: Action | None = None
        while action is not Action.FINISH:
            action, deadline = await self.step(op, deadline, update_deadline)
            if action is Action.SYNC:
                await self.delay(SYNC_DELAY)
