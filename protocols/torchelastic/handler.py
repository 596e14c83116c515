"""The dynamic rendezvous handler: ``next_rendezvous`` (exit, then join), the keep-alive
task and the lock it shares with ``num_nodes_waiting``, close, shutdown, and the bootstrap
store info (MASTER_ADDR/PORT) with upstream's caching."""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sim.protocols.api import OperationTimeout, Runtime, Store, StoreError, Task
from elastic_sim.protocols.sync import Event, Lock
from elastic_sim.protocols.torchelastic.backend import C10dBackend
from elastic_sim.protocols.torchelastic.executor import (
    FREE,
    CodecCost,
    Executor,
    StateHolder,
    WrittenMemos,
)
from elastic_sim.protocols.torchelastic.ops import (
    RendezvousError,
    close_op,
    exit_op,
    join_op,
    keep_alive_op,
)
from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
    to_us,
)

MASTER_ADDR_KEY = "MASTER_ADDR"
MASTER_PORT_KEY = "MASTER_PORT"
MIN_DELAY = 0.01
"""Upstream's ``_delay`` ignores requests shorter than this."""


@dataclass(frozen=True)
class RendezvousStoreInfo:
    """Where workers find the store they bootstrap from."""

    master_addr: str
    master_port: int


@dataclass(frozen=True)
class RendezvousInfo:
    """What ``next_rendezvous`` returns."""

    store: Store
    """The rendezvous store under this round's prefix."""
    rank: int
    world_size: int
    bootstrap: RendezvousStoreInfo
    round: int
    members: tuple[NodeDesc, ...] = ()
    """The round's participants in rank order, as this node saw them at FINISH."""


class RuntimeClock:
    """A node's clocks, read from its runtime."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def monotonic(self) -> float:
        """Monotonic seconds."""
        return self.rt.monotonic()

    def now_us(self) -> int:
        """Wall clock in microseconds (may be skewed)."""
        return to_us(self.rt.now())


async def delay(rt: Runtime, seconds: float) -> None:
    """Upstream's ``_delay``: sleep, ignoring requests under 10 ms."""
    if seconds >= MIN_DELAY:
        await rt.sleep(seconds)


async def build_store_info(store: Store, rank: int, addr: str, port: int) -> RendezvousStoreInfo:
    """Rank 0 publishes MASTER_ADDR/PORT under the round's prefix; everyone reads them back
    (blocking up to the store's read timeout, then StoreTimeout)."""
    if rank == 0:
        await store.set(MASTER_ADDR_KEY, addr.encode())
        await store.set(MASTER_PORT_KEY, str(port).encode())
    master_addr = (await store.get(MASTER_ADDR_KEY)).decode()
    master_port = int((await store.get(MASTER_PORT_KEY)).decode())
    return RendezvousStoreInfo(master_addr, master_port)


class DynamicRendezvousHandler:
    """One agent's view of the c10d dynamic rendezvous."""

    def __init__(
        self,
        rt: Runtime,
        node: NodeDesc,
        settings: RendezvousSettings,
        store: Store,
        *,
        share_store: bool = True,
        cache_duration: float = 1.0,
        codec: CodecCost = FREE,
    ) -> None:
        self.rt = rt
        self.node = node
        self.settings = settings
        self.store = store
        self.share_store = share_store
        """Default mode: rank 0 hosts one long-lived agent store (TORCH_DISABLE_SHARE_RDZV_TCP_STORE
        unset). Off: every round's rank 0 publishes a fresh free port."""
        written = rt.shared("torchelastic.rendezvous.written", WrittenMemos)
        self.backend = C10dBackend(store, settings.run_id, written.values)
        clock = RuntimeClock(rt)
        self.holder = StateHolder(self.backend, settings, clock, cache_duration,
                                  on_completed=self._record_completed,
                                  codec=codec, spend=rt.spend, written=written.states)
        self.executor = Executor(node, self.holder, settings, clock, lambda s: delay(rt, s))
        self.heartbeat_lock = Lock(rt, "heartbeat")
        self._timer: Task[None] | None = None
        self._timer_stop: Event | None = None
        self.bootstrap: RendezvousStoreInfo | None = None
        self.shared_store_addr: str | None = None

    def _record_completed(self, state: RendezvousState) -> None:
        """This node's write completed the round: the membership is decided now."""
        members = state.participants.members()
        self.rt.record("rdzv_complete", round=state.round, members=[n.addr for n in members])

    async def init(self) -> None:
        """What upstream's constructors do against the store (install the sentinel)."""
        await self.backend.init()

    async def next_rendezvous(self) -> RendezvousInfo:
        """Leave the previous round, join the next, restart heartbeats, bootstrap."""
        await self._stop_heartbeats()
        if self.holder.state.round == 0:  # the LOCAL, possibly stale, state
            await delay(self.rt, self.rt.rng.uniform(0, 0.3))
        deadline = self.rt.monotonic() + self.settings.join_timeout
        await self.executor.run(exit_op, deadline)
        await self.executor.run(join_op, deadline, lambda t: self.rt.monotonic() + t)
        self._start_heartbeats()
        state = self.holder.state
        rank, world = state.participants[self.node], len(state.participants)
        members = state.participants.members()
        store = self.store.prefixed(f"torch.rendezvous.{self.settings.run_id}.{state.round}")
        if not self.share_store:
            port = 29500 + self.rt.rng.randrange(20000)  # stands for get_free_port()
            info = await build_store_info(store, rank, self.node.addr, port)
            return RendezvousInfo(store, rank, world, info, state.round, members)
        if self.bootstrap is None or (rank == 0 and self.shared_store_addr is None):
            port = 0
            if rank == 0:
                self.shared_store_addr = await self.rt.host_store(0)
                port = int(self.shared_store_addr.rsplit(":", 1)[1])
            self.bootstrap = await build_store_info(store, rank, self.node.addr, port)
        return RendezvousInfo(store, rank, world, self.bootstrap, state.round, members)

    def cached_waiting(self) -> int | None:
        """:meth:`num_nodes_waiting` where it would suspend nothing (the lock free, the
        state cached), else None."""
        if not self.heartbeat_lock.locked() and self.holder.cached():
            return len(self.holder.state.wait_list)
        return None

    def cached_until(self) -> float:
        """The monotonic reading at which :meth:`cached_waiting` stops answering from the
        cache if nothing else happens (the cache's expiry)."""
        return self.holder.cache_expiry()

    async def num_nodes_waiting(self) -> int:
        """Nodes on the wait list (the state may come from the 1 s cache)."""
        waiting = self.cached_waiting()
        if waiting is not None:
            # what taking the free lock and a cached sync return, without their awaits
            # (neither would suspend): the agent's monitor loop asks this every 0.1 s
            return waiting
        async with self.heartbeat_lock:
            await self.holder.sync()
            return len(self.holder.state.wait_list)

    async def is_closed(self) -> bool:
        """Whether the rendezvous is closed."""
        async with self.heartbeat_lock:
            await self.holder.sync()
            return self.holder.state.closed

    async def set_closed(self) -> None:
        """Close the rendezvous for every node."""
        async with self.heartbeat_lock:
            await self._close()

    async def shutdown(self) -> bool:
        """Stop heartbeats and close; False (logged) if closing failed."""
        await self._stop_heartbeats()
        try:
            await self._close()
            return True
        except RendezvousError as exc:
            self.rt.record("rdzv_shutdown_failed", error=type(exc).__name__)
            return False

    async def _close(self) -> None:
        await self.executor.run(close_op, self.rt.monotonic() + self.settings.close_timeout)

    async def _keep_alive(self) -> None:
        async with self.heartbeat_lock:
            try:
                await self.executor.run(
                    keep_alive_op, self.rt.monotonic() + self.settings.heartbeat_timeout
                )
            except (RendezvousError, StoreError) as exc:  # upstream logs and carries on
                self.rt.record("rdzv_keep_alive_failed", error=type(exc).__name__)

    def _start_heartbeats(self) -> None:
        stop = Event(self.rt)
        self._timer_stop = stop
        self._timer = self.rt.spawn(self._heartbeat_loop(stop), "keep-alive")

    async def _heartbeat_loop(self, stop: Event) -> None:
        """Upstream's _PeriodicTimer: wait one interval (or the stop), then tick."""
        while True:
            try:
                await stop.wait(self.settings.keep_alive_interval)
                return
            except OperationTimeout:  # the interval passed without a stop: tick
                await self._keep_alive()

    async def _stop_heartbeats(self) -> None:
        """Set the stop event and join the timer (blocks while it is inside a store call)."""
        if self._timer is None or self._timer_stop is None:
            return
        self._timer_stop.set()
        await self._timer
        self._timer = None
