"""Calls between torchft's processes (gRPC to the Lighthouse and the Manager servers, HTTP
to the checkpoint servers) as request and reply messages over a modelled TCP stream.

Every process has one :class:`Endpoint`: one task takes its mailbox's messages, resolves
the calls it waits on and hands requests to the handlers of the ports it serves. An
address is ``host/process:port``; a request to a port nobody serves there (a server of an
earlier incarnation of the process) is dropped, as a connection to a closed port gets
nothing back.

TCP's part, simply: the caller resends a request from :data:`RTO` on, doubling, until
the server acknowledges it; the server handles a request once (a duplicate is
acknowledged again, or answered again once answered) and resends its answer until the
caller acknowledges it, for at most :data:`RETRIES_TIMEOUT`. So a call across a cut that
heals before its deadline goes through late, as upstream's does, and one whose deadline
passes fails. What upstream does differently: a call to a process that is gone fails at
once (a refused connection), where here it waits out its deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.protocols.api import JSON, Future, Message, OperationTimeout, Runtime, Timer

RTO = 0.2
"""The first retransmission timeout (Linux's TCP_RTO_MIN); each retry doubles it."""
RTO_MAX = 120.0
"""Linux's TCP_RTO_MAX."""
RETRIES_TIMEOUT = 924.6
"""How long unacknowledged data is resent before the connection is dropped (Linux's
tcp_retries2 = 15 at TCP_RTO_MIN)."""
REMEMBERED = 4096
"""Finished calls a server remembers, to acknowledge their late duplicates."""


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
    """Send ``method`` to ``addr`` once, expecting no reply (a datagram; a process
    without an :class:`Endpoint` may)."""
    proc, port = split(addr)
    rt.send(proc, {**body, "method": method, "port": port})


def _key(request: Message) -> tuple[str, int, int]:
    """A request's call: (caller, its connection, call id)."""
    return request.src, int(request.body["conn"]), int(request.body["call"])


async def _result(fut: Future[Any]) -> Any:
    return await fut


@dataclass
class _Resend:
    """A message resent until it is acknowledged (or given up on)."""

    dst: str
    body: dict[str, Any]
    rto: float = RTO
    spent: float = 0.0
    timer: Timer | None = None


@dataclass
class _Call:
    """A call waiting for its reply."""

    reply: Future[Any]
    request: _Resend


@dataclass
class _Served:
    """What a server knows of the calls it got."""

    pending: set[tuple[str, int, int]] = field(default_factory=set)
    answered: dict[tuple[str, int, int], _Resend] = field(default_factory=dict)
    done: dict[tuple[str, int, int], None] = field(default_factory=dict)
    """Calls by (caller, its connection, call id)."""


class Endpoint:
    """One process's calls and served ports."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._handlers: dict[tuple[int, str], Handler] = {}
        self._calls: dict[int, _Call] = {}
        self._served = _Served()
        self._next = 0
        self._conn = rt.rng.getrandbits(32)
        """This endpoint's connections (a process started again under the same name
        connects from other ports, so its calls are new calls)."""
        self._task = rt.spawn(self._loop(), "rpc")

    def serve(self, port: int, method: str, handler: Handler) -> None:
        """Answer ``method`` requests to ``port`` with ``handler``."""
        self._handlers[(port, method)] = handler

    async def _loop(self) -> None:
        while True:
            msg = await self.rt.recv()
            body = msg.body
            if "call" in body:
                self._request(msg)
            elif "reply" in body:
                self._reply(msg)
            elif "ack" in body:
                call = self._calls.get(int(body["ack"]))
                if call is not None:
                    self._stop(call.request)
            elif "reply_ack" in body:
                sent = self._served.answered.pop(
                    (msg.src, int(body["conn"]), int(body["reply_ack"])), None)
                if sent is not None:
                    self._stop(sent)
            else:
                handler = self._handler(body)
                if handler is not None:
                    self._handle(handler, msg)

    def _handle(self, handler: Handler, msg: Message) -> None:
        """Run a handler; a bug in one is traced (``ft_error`` where ``internal``) and does
        not stop the endpoint."""
        try:
            handler(msg)
        except Exception as exc:  # the model's own bug: say so in the trace
            self.rt.record("ft_error", where="internal", error=f"{type(exc).__name__}: {exc}")

    def _handler(self, body: Mapping[str, Any]) -> Handler | None:
        return self._handlers.get((int(body.get("port", -1)), str(body.get("method"))))

    # -- the caller's side -----------------------------------------------------------------

    async def call(self, addr: str, method: str, body: Mapping[str, JSON],
                   timeout: float) -> Mapping[str, Any]:
        """Call ``method`` at ``addr``; the reply's body. :class:`RpcTimeout` after
        ``timeout`` seconds, :class:`RpcError` when the server answers with an error."""
        proc, port = split(addr)
        self._next += 1
        cid = self._next
        request = _Resend(proc, {**body, "method": method, "port": port, "call": cid,
                                 "conn": self._conn, "timeout": timeout})
        call = _Call(self.rt.future(), request)
        self._calls[cid] = call
        self._send(request)
        try:
            reply: Mapping[str, Any] = await self.rt.wait_for(_result(call.reply), timeout)
        except OperationTimeout:
            raise RpcTimeout(f"{method} to {addr}: no reply within {timeout:g}s") from None
        finally:
            self._calls.pop(cid, None)
            self._stop(request)
        if "error" in reply:
            raise RpcError(f"{method} to {addr}: {reply['error']}")
        return reply

    def _reply(self, msg: Message) -> None:
        cid = int(msg.body["reply"])
        self.rt.send(msg.src, {"reply_ack": cid, "conn": self._conn})
        call = self._calls.get(cid)
        if call is not None and not call.reply.done():
            call.reply.set_result(msg.body)

    # -- the server's side ----------------------------------------------------------------

    def _request(self, msg: Message) -> None:
        key = _key(msg)
        served = self._served
        if key in served.answered:
            self.rt.send(msg.src, served.answered[key].body)
            return
        if key in served.pending or key in served.done:
            self.rt.send(msg.src, {"ack": key[2]})
            return
        handler = self._handler(msg.body)
        if handler is None:
            return  # nothing listens on that port: no answer at all
        served.pending.add(key)
        self.rt.send(msg.src, {"ack": key[2]})
        self._handle(handler, msg)

    def deadline(self, request: Message) -> float:
        """When the caller of ``request`` gives up, on this process's clock (gRPC sends
        the timeout and the server keeps the deadline)."""
        return self.rt.monotonic() + float(request.body.get("timeout", 0.0))

    def answer(self, request: Message, body: Mapping[str, JSON]) -> None:
        """Reply to ``request``, resent until the caller acknowledges it."""
        key = _key(request)
        served = self._served
        served.pending.discard(key)
        served.done[key] = None
        if len(served.done) > REMEMBERED:
            del served.done[next(iter(served.done))]
        reply = _Resend(request.src, {**body, "reply": key[2]})
        served.answered[key] = reply
        self._send(reply)

    # -- retransmission ---------------------------------------------------------------------

    def _send(self, msg: _Resend) -> None:
        self.rt.send(msg.dst, msg.body)
        if msg.spent < RETRIES_TIMEOUT:
            msg.timer = self.rt.after(msg.rto, lambda: self._again(msg))

    def _again(self, msg: _Resend) -> None:
        msg.spent += msg.rto
        msg.rto = min(2 * msg.rto, RTO_MAX)
        self._send(msg)

    @staticmethod
    def _stop(msg: _Resend) -> None:
        if msg.timer is not None:
            msg.timer.cancel()
            msg.timer = None
