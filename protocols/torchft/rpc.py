"""Calls between torchft's processes (gRPC to the Lighthouse and the Manager servers, HTTP
to the checkpoint servers) as request and reply messages with a deadline.

Every process has one :class:`Endpoint`: one task takes its mailbox's messages, answers
the replies its calls wait for and hands requests to the handlers of the ports it serves.
An address is ``host/process:port``; a request to a port nobody serves there (a server of
an earlier incarnation of the process) is dropped, as a connection to a closed port gets
nothing back.

What upstream does differently, simply: a call to a process that is gone fails at once
over TCP (a refused connection), where here it waits out its deadline; in both cases the
caller ends with an error, this one later (the model's contract says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elastic_sim.protocols.api import JSON, Future, Message, OperationTimeout, Runtime


class RpcError(Exception):
    """A call failed: its deadline passed (:class:`RpcTimeout`) or the server said no."""


class RpcTimeout(RpcError):
    """No reply within the call's deadline (gRPC DEADLINE_EXCEEDED)."""


Handler = Callable[[Message], None]
"""A request handler: it answers now (:meth:`Endpoint.answer`) or keeps the message to
answer later. It must not await."""


def address(proc: str, port: int) -> str:
    """The address of ``port`` on process ``proc``."""
    return f"{proc}:{port}"


def split(addr: str) -> tuple[str, int]:
    """``host/process:port`` -> (process, port)."""
    proc, _, port = addr.rpartition(":")
    return proc, int(port)


def tell(rt: Runtime, addr: str, method: str, body: Mapping[str, JSON]) -> None:
    """Send ``method`` to ``addr`` from ``rt``'s process, expecting no reply (a process
    without an :class:`Endpoint` may)."""
    proc, port = split(addr)
    rt.send(proc, {**body, "method": method, "port": port})


async def _result(fut: Future[Any]) -> Any:
    return await fut


class Endpoint:
    """One process's calls and served ports."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._handlers: dict[tuple[int, str], Handler] = {}
        self._calls: dict[int, Future[Any]] = {}
        self._next = 0
        self._task = rt.spawn(self._loop(), "rpc")

    def serve(self, port: int, method: str, handler: Handler) -> None:
        """Answer ``method`` requests to ``port`` with ``handler``."""
        self._handlers[(port, method)] = handler

    def close(self, port: int) -> None:
        """Stop serving ``port``: its requests are dropped from now on."""
        for key in [k for k in self._handlers if k[0] == port]:
            del self._handlers[key]

    async def _loop(self) -> None:
        while True:
            msg = await self.rt.recv()
            body = msg.body
            reply = body.get("reply")
            if reply is not None:
                fut = self._calls.pop(int(reply), None)
                if fut is not None and not fut.done():
                    fut.set_result(body)
                continue
            handler = self._handlers.get((int(body.get("port", -1)), str(body.get("method"))))
            if handler is not None:
                handler(msg)

    async def call(self, addr: str, method: str, body: Mapping[str, JSON],
                   timeout: float) -> Mapping[str, Any]:
        """Call ``method`` at ``addr``; the reply's body. :class:`RpcTimeout` after
        ``timeout`` seconds, :class:`RpcError` when the server answers with an error."""
        proc, port = split(addr)
        self._next += 1
        cid = self._next
        fut: Future[Any] = self.rt.future()
        self._calls[cid] = fut
        self.rt.send(proc, {**body, "method": method, "port": port, "call": cid,
                            "timeout": timeout})
        try:
            reply: Mapping[str, Any] = await self.rt.wait_for(_result(fut), timeout)
        except OperationTimeout:
            raise RpcTimeout(f"{method} to {addr}: no reply within {timeout:g}s") from None
        finally:
            self._calls.pop(cid, None)
        if "error" in reply:
            raise RpcError(f"{method} to {addr}: {reply['error']}")
        return reply

    def tell(self, addr: str, method: str, body: Mapping[str, JSON]) -> None:
        """Send a request nobody waits for the reply of."""
        tell(self.rt, addr, method, body)

    def deadline(self, request: Message) -> float:
        """When the caller of ``request`` gives up, on this process's clock (gRPC sends
        the timeout and the server keeps the deadline)."""
        return self.rt.monotonic() + float(request.body.get("timeout", 0.0))

    def answer(self, request: Message, body: Mapping[str, JSON]) -> None:
        """Reply to ``request`` (nothing if it expects none)."""
        call = request.body.get("call")
        if call is not None:
            self.rt.send(request.src, {**body, "reply": call})
