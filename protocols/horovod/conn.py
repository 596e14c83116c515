"""Request/response over a modelled TCP connection, on top of fire-and-forget messages.

Upstream carries a spawn (the ssh client), a worker's exit status (the same ssh session)
and a ``rank_and_size`` request (an HTTP GET) over TCP, which retransmits lost segments and
fails a connect only after the kernel's SYN retries. The runtime's :meth:`Runtime.send`
drops a message across a cut link or to a dead host, so this module puts TCP's behaviour
back, simply:

- the client opens the connection first: it resends a SYN (``conn_syn``, no data) on the
  SYN retransmission schedule (after 1, 2, 4, ... seconds) until the server's host answers
  (``conn_synack``, or ``conn_refused``: nothing listens there, an RST), and gives up after
  ``connect_timeout`` (Linux: 127 s), the outcome of a failed connect. Only then does the
  request travel (``conn_req``), resent from ``DATA_RTO`` on until the server accepts it
  (``conn_ack``) or answers: a server never sees a request before its handshake completes;
- the server accepts a request once (a duplicate is re-accepted or re-answered, never
  handled twice) and resends its answer on the same schedule until the client
  acknowledges it (``conn_reply_ack``);
- after the accept, the client may probe the server like TCP keepalive: after
  ``keepalive_time`` without an answer, ``keepalive_probes`` probes ``keepalive_interval``
  apart; none answered means the connection is dead;
- a process that ends while its host lives has its connections closed by the host's
  kernel (:class:`Sockets`): each peer learns at once (a client sees its connection reset,
  a server that its client is gone, ``conn_gone``), and what arrives for the process
  afterwards is answered with an RST; a host that crashed or lost power says nothing;
- a ``conn_reset`` fault (:meth:`Client.reset`, :meth:`Server.reset`) resets the
  connections with the hosts it names: a client's call fails as reset, a server's
  connection is gone (its answer is never sent).

A message is ``{"op": "conn_req", "cid": <client-unique id>, "reply_to": <client>, ...}``;
the connection is named by (client address, cid).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.protocols.api import Future, Message, OperationTimeout, Runtime

SYN_RTO = 1.0
"""The first retransmission timeout; each retry doubles it (Linux's initial RTO)."""
DATA_RTO = 0.2
"""The first retransmission timeout of data on an established connection (TCP_RTO_MIN,
the floor Linux's RTT-based RTO sits at on a fast network); each retry doubles it."""
RTO_MAX = 120.0
"""Linux's TCP_RTO_MAX."""
RETRIES_TIMEOUT = 924.6
"""How long Linux retransmits unacknowledged data before it drops the connection
(tcp_retries2 = 15 with TCP_RTO_MIN 200 ms)."""
RENDEZVOUS = "rendezvous"
"""The port of the driver's HTTP rendezvous service (rank_and_size, worker registration):
it listens while the driver runs and stops with it."""
CONN_OPS = ("conn_syn", "conn_synack", "conn_refused", "conn_req", "conn_ack", "conn_reply",
            "conn_reply_ack", "conn_probe", "conn_probe_ack", "conn_gone")
"""The ops this module owns; a dispatcher hands messages with these ops to it."""


class ConnectFailed(Exception):
    """No answer to the connect within ``connect_timeout`` (ssh exit 255, an HTTP error)."""


class ConnectRefused(ConnectFailed):
    """Nothing listens at the other end, or the connection was reset (an RST): the
    connect, or the connection, failed at once."""


class ConnectionDead(Exception):
    """Keepalive probes went unanswered: the peer is gone."""


@dataclass
class Keepalive:
    """TCP keepalive on the client's side (Linux defaults)."""

    time: float = 7200.0
    interval: float = 75.0
    probes: int = 9


@dataclass
class _Call:
    dst: str
    established: Future[None]
    accepted: Future[None]
    reply: Future[Mapping[str, Any]]
    probe: Future[None] | None = None
    refused: bool = False

    def refuse(self) -> None:
        """The other end reset the connection: every wait on it ends."""
        self.refused = True
        for fut in (self.established, self.accepted):
            if not fut.done():
                fut.set_result(None)
        if not self.reply.done():
            self.reply.set_result({})
        if self.probe is not None and not self.probe.done():
            self.probe.set_result(None)


def _host(addr: str) -> str:
    return addr.partition("/")[0]


@dataclass
class Client:
    """The client ends of one process's connections."""

    rt: Runtime
    connect_timeout: float = 127.0
    _calls: dict[int, _Call] = field(default_factory=dict)
    _next: int = 0

    def open(self, dst: str, body: Mapping[str, Any], port: str = "") -> int:
        """Open a connection to ``dst`` (``port``: what must listen there, "" for ``dst``
        itself) and send ``body`` once it is established; the connection id, for
        :meth:`connect`/:meth:`reply`."""
        self._next += 1
        cid = self._next
        self._calls[cid] = _Call(dst, self.rt.future(), self.rt.future(), self.rt.future())
        syn = {"op": "conn_syn", "cid": cid, "reply_to": self.rt.name, "port": port}
        req = {**body, "op": "conn_req", "cid": cid, "reply_to": self.rt.name}
        self.rt.spawn(self._transmit(dst, syn, req), f"conn{cid}.syn")
        return cid

    async def _transmit(self, dst: str, syn: dict[str, Any], req: dict[str, Any]) -> None:
        """The handshake, then the request: each resent until the other end answers."""
        call = self._calls.get(int(req["cid"]))
        if call is None:
            return
        await self._resend(dst, syn, call.established, SYN_RTO)
        if not call.refused and int(req["cid"]) in self._calls:
            await self._resend(dst, req, call.accepted, DATA_RTO)

    async def _resend(self, dst: str, body: dict[str, Any], until: Future[None],
                      rto: float) -> None:
        # a segment to a process that is gone from a live host is reset by its kernel
        rst = {"op": "conn_refused", "cid": body["cid"]}
        while not until.done():
            self.rt.send(dst, body, refused=rst)
            try:
                await self.rt.wait_for(_wait(until), rto)
            except OperationTimeout:
                pass
            rto = min(2 * rto, RTO_MAX)

    async def connect(self, cid: int, timeout: float | None = None) -> None:
        """Wait until the connection is established; :class:`ConnectRefused` at once if
        nothing listens there, :class:`ConnectFailed` after ``timeout`` (default
        ``connect_timeout``)."""
        call = self._calls[cid]
        limit = self.connect_timeout if timeout is None else timeout
        try:
            await self.rt.wait_for(_wait(call.established), limit)
        except OperationTimeout:
            self.close(cid)
            raise ConnectFailed(f"connect timed out after {limit}s") from None
        if call.refused:
            self.close(cid)
            raise ConnectRefused("connection refused")

    async def reply(self, cid: int, dst: str, keepalive: Keepalive | None = None
                    ) -> Mapping[str, Any]:
        """Wait for the answer of an accepted request; with ``keepalive``, raise
        :class:`ConnectionDead` when the server stops answering probes."""
        call = self._calls[cid]
        try:
            if keepalive is None:
                reply = await call.reply
            else:
                reply = await self._keepalive(call, cid, dst, keepalive)
            if call.refused:
                raise ConnectRefused("connection reset")
            return reply
        finally:
            self.close(cid)

    async def _keepalive(self, call: _Call, cid: int, dst: str, keepalive: Keepalive
                         ) -> Mapping[str, Any]:
        while True:
            try:
                out: Mapping[str, Any] = await self.rt.wait_for(_wait(call.reply),
                                                                keepalive.time)
                return out
            except OperationTimeout:
                pass
            if not await self._probe(cid, dst, keepalive) and not call.reply.done():
                raise ConnectionDead("keepalive probes unanswered")

    async def _probe(self, cid: int, dst: str, ka: Keepalive) -> bool:
        call = self._calls[cid]
        for _ in range(ka.probes):
            call.probe = self.rt.future()
            self.rt.send(dst, {"op": "conn_probe", "cid": cid, "reply_to": self.rt.name})
            try:
                await self.rt.wait_for(_wait(call.probe), ka.interval)
                return True
            except OperationTimeout:
                if call.reply.done():
                    return True
        return False

    def reset(self, hit: Callable[[str], bool]) -> None:
        """A ``conn_reset`` fault: the calls to hosts ``hit`` names fail as reset."""
        for cid in sorted(self._calls):
            call = self._calls[cid]
            if hit(_host(call.dst)):
                call.refuse()

    def reached(self, cid: int) -> bool:
        """Whether connection ``cid`` (still open) was ever established, not refused."""
        call = self._calls.get(cid)
        return call is not None and call.established.done() and not call.refused

    def open_calls(self) -> list[tuple[int, str]]:
        """``(cid, dst)`` of every connection still open, in the order opened."""
        return [(cid, self._calls[cid].dst) for cid in sorted(self._calls)]

    def close(self, cid: int) -> None:
        """Forget a connection (late answers are still acknowledged, then dropped)."""
        call = self._calls.pop(cid, None)
        if call is None:
            return
        for fut in (call.established, call.accepted):
            if not fut.done():
                fut.set_result(None)  # stops the retransmission

    def handle(self, msg: Message) -> bool:
        """Take a connection message addressed to a client; False if it is not one."""
        op = msg.body.get("op")
        if op not in ("conn_synack", "conn_refused", "conn_ack", "conn_reply",
                      "conn_probe_ack"):
            return False
        cid = int(msg.body["cid"])
        if op == "conn_reply":
            if cid > self._next:  # never opened here (a process started again): an RST
                self.rt.send(msg.src, gone(cid, self.rt.name))
                return True
            self.rt.send(msg.src, {"op": "conn_reply_ack", "cid": cid,
                                   "reply_to": self.rt.name})
        call = self._calls.get(cid)
        if call is None:
            return True
        if op == "conn_refused":
            call.refuse()
            return True
        if not call.established.done():
            call.established.set_result(None)
        if op != "conn_synack" and not call.accepted.done():
            call.accepted.set_result(None)
        if op == "conn_reply" and not call.reply.done():
            call.reply.set_result(msg.body)
        if op == "conn_probe_ack" and call.probe is not None and not call.probe.done():
            call.probe.set_result(None)
        return True


def gone(cid: int, client: str) -> dict[str, Any]:
    """What tells a server that the client end of connection ``(client, cid)`` is gone."""
    return {"op": "conn_gone", "cid": cid, "reply_to": client}


@dataclass
class _Served:
    reply: dict[str, Any] | None = None
    acked: Future[None] | None = None
    dead: bool = False
    """The connection is gone (the client's end closed, or reset): nothing is sent on it."""

    def finished(self) -> bool:
        """Answered and acknowledged, or gone."""
        return self.dead or (self.acked is not None and self.acked.done())

    def kill(self) -> None:
        """The connection is gone: stop sending on it."""
        self.dead = True
        if self.acked is not None and not self.acked.done():
            self.acked.set_result(None)


@dataclass
class Server:
    """The server ends of one process's connections: at-most-once handling.

    Its host's kernel answers SYNs (:meth:`syn`): ``listening`` says whether something
    listens on a SYN's ``port`` here (default: this process, which got the SYN, does); a
    SYN gets ``conn_synack`` if so, ``conn_refused`` (an RST) if not."""

    rt: Runtime
    listening: Callable[[str], bool] | None = None
    on_gone: Callable[[Mapping[str, Any]], None] | None = None
    """Told (with the request) when a client's end of an unfinished connection is gone."""
    _conns: dict[tuple[str, int], _Served] = field(default_factory=dict)
    _requests: dict[tuple[str, int], Mapping[str, Any]] = field(default_factory=dict)

    def syn(self, msg: Message) -> dict[str, Any] | None:
        """The kernel's answer to a SYN (``conn_synack``, or ``conn_refused`` when nothing
        listens on its port), given even while this process is stopped; None for any other
        message. Install it with :meth:`Runtime.answer_in_kernel`."""
        if msg.body.get("op") != "conn_syn":
            return None
        port = str(msg.body.get("port", ""))
        listens = not port or self.listening is None or self.listening(port)
        return {"op": "conn_synack" if listens else "conn_refused", "cid": msg.body["cid"]}

    def refuse(self, msg: Message) -> None:
        """Reset the connection ``msg`` came on (what it wanted is gone)."""
        self.rt.send(str(msg.body["reply_to"]), {"op": "conn_refused", "cid": msg.body["cid"]})

    def accept(self, msg: Message) -> bool:
        """Acknowledge a request; True the first time (the caller handles it then), False
        for a duplicate (re-accepted, or re-answered if already answered)."""
        key = (str(msg.body["reply_to"]), int(msg.body["cid"]))
        served = self._conns.get(key)
        if served is not None and served.dead:
            self.rt.send(key[0], {"op": "conn_refused", "cid": key[1]})
            return False
        if served is not None and served.reply is not None:
            self.rt.send(key[0], served.reply)
            return False
        self.rt.send(key[0], {"op": "conn_ack", "cid": key[1]})
        if served is not None:
            return False
        self._conns[key] = _Served()
        self._requests[key] = msg.body
        return True

    def answer(self, request: Mapping[str, Any], body: Mapping[str, Any]) -> None:
        """Send the answer to ``request`` and resend it until it is acknowledged (nothing
        once the connection is gone)."""
        key = (str(request["reply_to"]), int(request["cid"]))
        served = self._conns.setdefault(key, _Served())
        if served.dead:
            return
        served.reply = {**body, "op": "conn_reply", "cid": key[1]}
        served.acked = self.rt.future()
        self.rt.spawn(self._retransmit(key, served), f"conn{key[1]}.reply")

    async def _retransmit(self, key: tuple[str, int], served: _Served) -> None:
        rto, spent = SYN_RTO, 0.0
        assert served.acked is not None and served.reply is not None
        while not served.acked.done() and spent < RETRIES_TIMEOUT:
            spent += rto
            self.rt.send(key[0], served.reply)
            try:
                await self.rt.wait_for(_wait(served.acked), rto)
            except OperationTimeout:
                pass
            rto = min(2 * rto, RTO_MAX)

    def reset(self, hit: Callable[[str], bool]) -> None:
        """A ``conn_reset`` fault: the unfinished connections from hosts ``hit`` names are
        gone (their answers are never sent)."""
        for key in sorted(self._conns):
            served = self._conns[key]
            if not served.finished() and hit(_host(key[0])):
                served.kill()
                self._requests.pop(key, None)

    def open_conns(self) -> list[tuple[str, int]]:
        """``(client, cid)`` of every connection not finished, in a stable order."""
        return [key for key in sorted(self._conns) if not self._conns[key].finished()]

    def handle(self, msg: Message) -> bool:
        """Take an acknowledgement, a probe or a client's close addressed to a server;
        False otherwise."""
        op = msg.body.get("op")
        if op == "conn_probe":
            self.rt.send(str(msg.body["reply_to"]),
                         {"op": "conn_probe_ack", "cid": msg.body["cid"]})
            return True
        if op not in ("conn_reply_ack", "conn_gone"):
            return False
        key = (str(msg.body["reply_to"]), int(msg.body["cid"]))
        served = self._conns.get(key)
        if served is None or served.finished():
            return True
        if op == "conn_gone":
            served.kill()
            request = self._requests.pop(key, None)
            if request is not None and self.on_gone is not None:
                self.on_gone(request)
        elif served.acked is not None:
            served.acked.set_result(None)
            self._requests.pop(key, None)
        return True


@dataclass
class Sockets:
    """What a process's host kernel says for its connections once the process ended
    (:meth:`Runtime.close_in_kernel`): at the exit, an RST to each client it was serving
    and a close to each server it was a client of; afterwards, an RST to whatever
    arrives for one of its connections or as a new one."""

    client: Client
    server: Server

    def closing(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The close of each open connection."""
        name = self.client.rt.name
        out: list[tuple[str, Mapping[str, Any]]] = [
            (dst, gone(cid, name)) for cid, dst in self.client.open_calls()]
        out += [(client, {"op": "conn_refused", "cid": cid})
                for client, cid in self.server.open_conns()]
        return out

    def after_exit(self, msg: Message) -> Mapping[str, Any] | None:
        """The RST for a segment of a connection (or a SYN) that arrives now."""
        op = msg.body.get("op")
        if op in ("conn_syn", "conn_req", "conn_probe"):
            return {"op": "conn_refused", "cid": msg.body["cid"]}
        if op == "conn_reply":
            return gone(int(msg.body["cid"]), self.client.rt.name)
        return None


async def _wait(fut: Future[Any]) -> Any:
    return await fut
