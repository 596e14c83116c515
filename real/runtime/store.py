"""The key-value store of real mode: ``torch.distributed.TCPStore`` behind the contract.

A c10d client serialises its calls (one blocked ``wait`` holds up every other call of that
client), which the contract does not: two tasks of a process may use one store at once.
So a client here is a small pool of c10d connections (``TCPStore.clone``), one per call in
flight, grown on demand. Like c10d, a client never reconnects: once a connection finds the
server gone, every later call fails with :class:`StoreConnectionError`.

Blocking c10d calls run on the runtime's thread pool (``Blocking``) so the loop stays free.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from elastic_sim.protocols.api import Store, StoreConnectionError, StoreError, StoreTimeout
from elastic_sim.real.runtime.aio import boundary

R = TypeVar("R")


class Blocking(Protocol):
    """Runs a blocking call off the event loop: ``await blocking(fn)``."""

    def __call__(self, fn: Callable[[], R], /) -> asyncio.Future[R]: ...


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"store address {addr!r}: expected 'host:port'")
    return host, int(port)


def torch_distributed() -> Any:
    """``torch.distributed``, imported on first use (the sim runs without torch), untyped
    (its stubs do not re-export the c10d classes)."""
    import torch.distributed

    return torch.distributed


def store_error(exc: BaseException) -> StoreError:
    """The contract's error for a c10d store failure."""
    dist = torch_distributed()
    if isinstance(exc, dist.DistStoreError) and "timeout" in str(exc).lower():
        return StoreTimeout(str(exc))
    return StoreConnectionError(str(exc))


def listening_socket(bind: str, port: int) -> socket.socket:
    """A TCP socket listening on ``bind:port`` (0: any free port) and no other address.

    c10d's own server listens on every interface whatever host it is given; handed this
    socket instead, the store is reachable only where the run binds (loopback by default)."""
    info = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, addr = info[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


async def host_store(blocking: Blocking, bind: str, port: int) -> Any:
    """Start a TCPStore server on ``bind:port`` (0: any free port; read ``.port``) in this
    process, listening on ``bind`` only; keep it referenced: the server stops when it is
    collected."""
    dist = torch_distributed()
    sock = listening_socket(bind, port)
    bound = int(sock.getsockname()[1])

    def start() -> Any:
        return dist.TCPStore(bind, bound, is_master=True, wait_for_workers=False,
                             master_listen_fd=sock.fileno())

    try:
        server = await blocking(start)
    except BaseException:
        sock.close()
        raise
    sock.detach()  # the server owns the descriptor now
    return server


async def connect_store(blocking: Blocking, host: str, port: int, timeout: float) -> TCPStoreClient:
    """A client of the store at ``host:port``; :class:`StoreConnectionError` if no server
    answers within ``timeout`` (c10d itself may retry for longer: it is not waited for)."""
    dist = torch_distributed()
    addr = f"{host}:{port}"
    connect = blocking(
        lambda: dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout))
    )
    try:
        client = await asyncio.wait_for(connect, timeout)
    except asyncio.TimeoutError:
        raise StoreConnectionError(f"no store answered at {addr} within {timeout}s") from None
    except (RuntimeError, OSError) as exc:
        raise StoreConnectionError(f"store at {addr}: {exc}") from exc
    return TCPStoreClient(client, timeout, blocking)


class TCPStoreClient(Store):
    """A contract store over a pool of c10d TCPStore client connections."""

    def __init__(self, client: Any, timeout: float, blocking: Blocking) -> None:
        self.timeout = timeout
        self._first = client
        self._idle: list[Any] = [client]
        self._blocking = blocking
        self._gone: str | None = None

    async def _call(self, op: Callable[[Any], R]) -> R:
        if self._gone is not None:
            raise StoreConnectionError(self._gone)

        def work() -> R:
            # list.pop/append are atomic under the GIL: the pool needs no lock.
            client = self._idle.pop() if self._idle else self._first.clone()
            try:
                out = op(client)
            except (RuntimeError, OSError) as exc:
                if isinstance(store_error(exc), StoreTimeout):
                    self._idle.append(client)  # still in step with the server
                raise
            self._idle.append(client)
            return out

        try:
            return await self._blocking(work)
        except (RuntimeError, OSError) as exc:
            err = store_error(exc)
            if isinstance(err, StoreConnectionError):
                self._gone = f"store server gone: {exc}"
            raise err from exc

    async def dedicated(self) -> Any:
        """A new c10d connection of its own (a process group keeps using its store)."""
        return await self._call(lambda client: client.clone())

    @boundary
    async def set(self, key: str, value: bytes) -> None:
        await self._call(lambda c: c.set(key, value))

    @boundary
    async def get(self, key: str) -> bytes:
        wait = timedelta(seconds=self.timeout)

        def op(c: Any) -> bytes:
            c.wait([key], wait)
            return bytes(c.get(key))

        return await self._call(op)

    @boundary
    async def add(self, key: str, amount: int) -> int:
        return int(await self._call(lambda c: c.add(key, amount)))

    @boundary
    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        return bytes(await self._call(lambda c: c.compare_set(key, expected, desired)))

    @boundary
    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        wait = timedelta(seconds=self.timeout if timeout is None else timeout)
        await self._call(lambda c: c.wait(list(keys), wait))

    @boundary
    async def check(self, keys: Sequence[str]) -> bool:
        return bool(await self._call(lambda c: c.check(list(keys))))

    @boundary
    async def delete(self, key: str) -> bool:
        return bool(await self._call(lambda c: c.delete_key(key)))

    @boundary
    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        if not keys:
            return []
        wait, names = timedelta(seconds=self.timeout), list(keys)

        def op(c: Any) -> list[bytes]:
            c.wait(names, wait)
            return [bytes(v) for v in c.multi_get(names)]

        return await self._call(op)
