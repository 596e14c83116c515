"""Control messages over TCP: framing, the mailbox, the server that fills it, and the
per-destination senders.

A frame is a 4-byte big-endian length and a UTF-8 JSON object
``{"src": ..., "dst": ..., "body": {...}}``. Nothing read off the network is ever
unpickled or evaluated; a frame that is not such an object closes the connection.
Sending is fire and forget: each destination has a writer task with a cached connection,
and a message to a process that is gone (or never existed) is dropped.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from elastic_sim.protocols.api import JSON, Message, OperationTimeout

PUBLISH_POLL = 0.02
"""Seconds between looks for a starting process's published address."""
MAX_FRAME = 64 << 20
"""Largest frame accepted (bytes); a bigger length prefix closes the connection."""

Resolver = Callable[[str], "tuple[str, int] | None"]
"""Maps a process name to its server's ``(host, port)``, or None if it has none."""


def encode_frame(src: str, dst: str, body: Mapping[str, JSON]) -> bytes:
    """One frame; raises TypeError/ValueError at once if ``body`` is not JSON."""
    data = json.dumps(
        {"src": src, "dst": dst, "body": dict(body)}, separators=(",", ":"), allow_nan=False
    ).encode()
    return struct.pack(">I", len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's JSON value; None at a clean end of stream.

    Raises ValueError on an oversized or malformed frame."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ValueError("stream ended inside a frame header") from None
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    return json.loads((await reader.readexactly(size)).decode())


class Mailbox:
    """Messages received by one process, in arrival order."""

    def __init__(self) -> None:
        self._items: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[Message]] = deque()

    def put(self, msg: Message) -> None:
        """Deliver ``msg`` to the oldest waiting receiver, else queue it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(msg)
                return
        self._items.append(msg)

    async def get(self, timeout: float | None) -> Message:
        """The next message; :class:`OperationTimeout` after ``timeout`` seconds."""
        if self._items:
            return self._items.popleft()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Message] = loop.create_future()
        self._waiters.append(waiter)
        timer = None
        if timeout is not None:
            timer = loop.call_later(timeout, _expire, waiter, timeout)
        try:
            return await waiter
        except asyncio.CancelledError:
            # Handed a message just as the receiver was cancelled: keep it for the next.
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._items.appendleft(waiter.result())
            raise
        finally:
            if timer is not None:
                timer.cancel()


def _expire(waiter: asyncio.Future[Message], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(OperationTimeout(f"no message within {timeout}s"))


def parse_message(obj: Any, me: str) -> Message | None:
    """The message in a decoded frame addressed to ``me``; None if it is malformed."""
    if not isinstance(obj, dict):
        return None
    src, dst, body = obj.get("src"), obj.get("dst"), obj.get("body")
    if not isinstance(src, str) or dst != me or not isinstance(body, dict):
        return None
    return Message(src=src, body=body)


class Server:
    """Accepts connections from other processes and files their frames in a mailbox."""

    def __init__(self, me: str, mailbox: Mailbox) -> None:
        self.me = me
        self.mailbox = mailbox
        self._server: asyncio.Server | None = None

    async def start(self, bind: str) -> int:
        """Listen on ``bind`` at an ephemeral port; return the port."""
        self._server = await asyncio.start_server(self._serve, host=bind, port=0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                obj = await read_frame(reader)
                msg = parse_message(obj, self.me) if obj is not None else None
                if msg is None:
                    break
                self.mailbox.put(msg)
        except (ValueError, OSError, asyncio.IncompleteReadError):
            pass  # a peer that died mid-frame or spoke nonsense: drop the connection
        finally:
            writer.close()

    def close(self) -> None:
        """Stop accepting connections."""
        if self._server is not None:
            self._server.close()


class Outbox:
    """Fire-and-forget senders, one writer task and cached connection per destination."""

    def __init__(self, me: str, resolve: Resolver, connect_timeout: float = 5.0) -> None:
        self.me = me
        self._resolve = resolve
        self._connect_timeout = connect_timeout
        self._queues: dict[str, asyncio.Queue[bytes]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, dst: str, body: Mapping[str, JSON]) -> None:
        """Queue ``body`` for ``dst``; it is delivered in order, or dropped if ``dst`` is
        unreachable."""
        frame = encode_frame(self.me, dst, body)
        queue = self._queues.get(dst)
        if queue is None:
            queue = self._queues[dst] = asyncio.Queue()
            self._keep(self._pump(dst, queue))
        queue.put_nowait(frame)

    async def _pump(self, dst: str, queue: asyncio.Queue[bytes]) -> None:
        writer: asyncio.StreamWriter | None = None
        while True:
            frame = await queue.get()
            # Two tries: a cached connection may belong to an earlier incarnation of dst.
            for _ in range(2):
                if writer is None or writer.is_closing():
                    writer = await self._connect(dst)
                    if writer is None:
                        break  # unreachable: the message is lost
                try:
                    writer.write(frame)
                    await writer.drain()
                    break
                except OSError:
                    writer.close()
                    writer = None
            queue.task_done()

    async def _connect(self, dst: str) -> asyncio.StreamWriter | None:
        # A process that has not published its address yet may be starting (every host's
        # first process opens its server just after the run's GO, some later than others
        # on a loaded machine): wait for it up to the connect timeout, as the sim delivers
        # a message to a process that is up when it arrives. One that published and
        # refuses is gone: no wait. (A host that starts late, within the timeout of a
        # message sent to it before it started, gets it here where the sim drops it; no
        # shipped protocol messages a host before it has joined.)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        addr = self._resolve(dst)
        while addr is None and loop.time() < deadline:
            await asyncio.sleep(PUBLISH_POLL)
            addr = self._resolve(dst)
        if addr is None:
            return None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*addr), self._connect_timeout
            )
        except (OSError, asyncio.TimeoutError):
            return None
        self._keep(_close_on_eof(reader, writer))
        return writer

    def _keep(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task held until it ends (asyncio holds tasks weakly)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` for every queued message to reach the kernel (which
        delivers it even after this process exits)."""
        pending = [q.join() for q in self._queues.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*pending), timeout)
        except asyncio.TimeoutError:
            pass  # a frozen or vanished receiver: what is left is lost

    def close(self) -> None:
        """Stop every sender; queued messages are lost."""
        for task in list(self._tasks):
            task.cancel()


async def _close_on_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Receivers never write back, so anything but data means the peer has gone."""
    try:
        while await reader.read(4096):
            pass
    except OSError:
        pass
    writer.close()
