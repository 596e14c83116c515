"""Process groups of real mode: Gloo (CPU tensors) behind the contract's :class:`Group`.

A collective is enqueued on the event loop thread, so members' collectives keep the
order in which the protocol issued them, and waited for on the runtime's thread pool.
Gloo's own ``abort`` neither wakes a pending collective nor tells the peers, so
:meth:`GlooGroup.abort` fails pending and later collectives itself and destroys the Gloo
group, which closes its connections; a pool thread still stuck in Gloo is left to its
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import mmap
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

from elastic_sim.protocols.api import (
    CollectiveError,
    CollectiveFailed,
    CollectiveTimeout,
    Group,
    PrefixStore,
    Received,
    Sendable,
    Store,
    StoreError,
)
from elastic_sim.real.runtime.aio import boundary
from elastic_sim.real.runtime.store import Blocking, TCPStoreClient, torch_distributed

R = TypeVar("R")

_TIMEOUT_WORDS = ("timed out", "wait timeout", "socket timeout", "connect timeout")


def collective_error(text: str) -> CollectiveError:
    """The contract's error for a Gloo failure message: a timeout, or a dead/closed peer."""
    if any(word in text.lower() for word in _TIMEOUT_WORDS):
        return CollectiveTimeout(text)
    return CollectiveFailed(text)


def unwrap(store: Store) -> tuple[TCPStoreClient, list[str]]:
    """The real client under contract ``PrefixStore`` views, and their prefixes
    (innermost first)."""
    prefixes: list[str] = []
    while isinstance(store, PrefixStore):
        prefixes.insert(0, store.prefix)
        store = store.inner
    if not isinstance(store, TCPStoreClient):
        raise TypeError(f"a real group needs a store from connect_store, not {store!r}")
    return store, prefixes


async def new_group(
    blocking: Blocking, bind: str, store: Store, name: str, rank: int, size: int, timeout: float
) -> GlooGroup:
    """Join Gloo group ``name`` through ``store`` (keys under the store's prefixes and
    ``name``); :class:`CollectiveTimeout` if the members do not all join in ``timeout``."""
    dist = torch_distributed()
    c10d = await c10d_store(store, name)

    def create() -> Any:
        opts = dist.ProcessGroupGloo._Options()
        opts._timeout = timedelta(seconds=timeout)
        opts._devices = [dist.ProcessGroupGloo.create_device(hostname=bind)]
        return dist.ProcessGroupGloo(dist.PrefixStore(name, c10d), rank, size, opts)

    try:
        pg = await blocking(create)
    except (RuntimeError, OSError) as exc:
        raise collective_error(str(exc)) from None
    return GlooGroup(pg, name, rank, size, blocking)


async def c10d_store(store: Store, name: str) -> Any:
    """A torch store (a dedicated connection) seen through ``store``'s prefixes, for a
    torch process group to rendezvous on; :class:`CollectiveFailed` if the store fails."""
    dist = torch_distributed()
    client, prefixes = unwrap(store)
    try:
        c10d = await client.dedicated()
    except StoreError as exc:
        raise CollectiveFailed(f"group {name}: store: {exc}") from exc
    for prefix in prefixes:
        c10d = dist.PrefixStore(prefix, c10d)
    return c10d


class GlooGroup(Group):
    """One member's handle on a Gloo process group."""

    future_when_done: ClassVar[bool] = True
    """Whether a collective's future completes when the collective is done (Gloo's does,
    on Gloo's thread; NCCL's at enqueue, and only ``wait`` raises its timeout)."""

    def __init__(self, pg: Any, name: str, rank: int, size: int, blocking: Blocking) -> None:
        self._pg = pg
        self.name = name
        self.rank = rank
        self.size = size
        self._blocking = blocking
        self._aborted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def _run(self, enqueue: Callable[[], Any], p2p: bool = False) -> None:
        """Enqueue a Gloo op now and wait for it off the loop; fail at once when aborted.

        A collective's work completes a future on Gloo's thread, whose callback hands the
        outcome to the loop (no thread of ours in between). Gloo's send and recv (``p2p``)
        have no future, and NCCL's is no sign of completion: a pool thread waits for
        those."""
        if self._aborted.done():
            raise CollectiveFailed(f"group {self.name} was aborted")
        try:
            work = enqueue()
        except (RuntimeError, OSError) as exc:
            raise collective_error(str(exc)) from None
        # A Gloo work keeps the group's connections open (abort relies on closing them):
        # only Gloo and the pool thread waiting for it may hold it, and errors come back
        # as text.
        done: asyncio.Future[str | None]
        if p2p or not self.future_when_done:
            done = self._blocking(functools.partial(_wait, work))
            done.add_done_callback(_drop_result)  # it may outlive its waiter (abort, cancel)
        else:
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            work.get_future().add_done_callback(functools.partial(_completed, loop, done))
        del work
        either: set[asyncio.Future[Any]] = {done, self._aborted}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not done.done():
            raise CollectiveFailed(f"group {self.name} was aborted")
        error = done.result()
        if error is not None:
            raise collective_error(error)

    @boundary
    async def _allreduce(self, values: list[float], name: str = "") -> list[float]:
        import torch

        t = torch.tensor(values, dtype=torch.float64)
        await self._run(lambda: self._pg.allreduce([t]))
        return [float(v) for v in t.tolist()]

    @boundary
    async def _broadcast(self, data: bytes, root: int, name: str = "") -> Received:
        """The root's bytes go out of its own buffer, read only (returned as they are); a
        receiver gets the one buffer Gloo filled (no copy into bytes)."""
        dist = torch_distributed()
        opts = dist.BroadcastOptions()
        opts.rootRank = root
        opts.rootTensor = 0
        out: Received = data if self.rank == root else _receive_buffer(len(data))
        t = _tensor(out)
        await self._run(lambda: self._pg.broadcast([t], opts))
        return out

    @boundary
    async def _barrier(self, name: str = "") -> None:
        await self._run(self._pg.barrier)

    @boundary
    async def _send(self, dst: int, data: Sendable) -> None:
        t = _tensor(data)  # read only, no copy
        await self._run(lambda: self._pg.send([t], dst, 0), p2p=True)

    @boundary
    async def _recv(self, src: int, nbytes: int) -> Received:
        buf = _receive_buffer(nbytes)  # filled in place and handed over (no copy into bytes)
        t = _tensor(buf)
        await self._run(lambda: self._pg.recv([t], src, 0), p2p=True)
        return buf

    def abort(self) -> None:
        if self._aborted.done():
            return
        self._aborted.set_result(None)
        with contextlib.suppress(RuntimeError):
            self._pg.abort()
        # Gloo's abort leaves the connections open, so peers blocked on this member would
        # wait out the timeout. Destroying the group closes them: the peers see this member
        # leave, as in the sim. The destructor waits for a collective still in flight, so
        # the last reference is dropped on the pool, not on the loop.
        doomed = [self._pg]
        self._pg = None
        self._blocking(doomed.clear).add_done_callback(_drop_result)


def _receive_buffer(nbytes: int) -> memoryview:
    """A writable buffer for ``nbytes`` received bytes that nothing touches before the
    transport writes into it: private anonymous memory (as ``torch.empty`` of that size
    gets from malloc), mapped on first write by the kernel while it copies the data in.
    (A bytearray is zeroed first: on a virtual machine that first touch, page by page from
    user space, cost more than the whole 256 MB transfer. ``mmap``'s default, shared
    memory, faults and unmaps about 7 ms slower per 64 MB: 10% of a broadcast.)"""
    if nbytes == 0:
        return memoryview(b"")
    return memoryview(mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE))


def _tensor(buf: bytes | bytearray | memoryview) -> Any:
    """A uint8 tensor sharing ``buf``'s memory: results land in a writable ``buf``; an
    immutable one (a sender's bytes) is only read by Gloo, so torch's warning about
    writing to it does not apply."""
    import torch

    if not buf:
        return torch.empty(0, dtype=torch.uint8)
    if isinstance(buf, bytearray) or (isinstance(buf, memoryview) and not buf.readonly):
        return torch.frombuffer(buf, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(buf, dtype=torch.uint8)


def _wait(work: Any) -> str | None:
    """Wait for a Gloo work on a pool thread; its error as text (a traceback would keep
    the work, and with it the group's connections, alive)."""
    try:
        work.wait()
    except (RuntimeError, OSError) as exc:
        return str(exc)
    return None


def _completed(loop: asyncio.AbstractEventLoop, done: asyncio.Future[str | None],
               future: Any) -> None:
    """On Gloo's thread, when a work is done: its error as text (as ``_wait`` gives it),
    or None, to ``done`` on the loop."""
    try:
        future.value()
        error: str | None = None
    except Exception as exc:  # anything raised here would be lost in Gloo's thread
        error = str(exc) or type(exc).__name__
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, done, error)


def _settle(done: asyncio.Future[str | None], error: str | None) -> None:
    if not done.done():
        done.set_result(error)


def _drop_result(fut: asyncio.Future[Any]) -> None:
    """Retrieve a result nobody waits for any more (no 'never retrieved' warnings)."""
    if not fut.cancelled():
        fut.exception()
