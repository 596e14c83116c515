"""The key-value store: a server inside one process, clients with c10d TCPStore semantics.

Each call is a request and a response over the network: it costs the round-trip path latency
plus the server's service time; the server serves one request at a time, in arrival order.

- Server dead (its process ended, its host crashed): pending and later calls fail at once
  with StoreConnectionError; a client never reconnects.
- Server unreachable (its host paused, its process stopped, or a partition between client and
  server): requests are held and served when it is reachable again. So set/add/compare_set
  block with no timeout, and get/wait report StoreTimeout when the server finally answers if
  their deadline passed meanwhile (shared/calibration.md: a SIGSTOPped TCPStore).
- Server powered off (its host stopped dead: no FIN or RST ever leaves it): it never answers
  again. A call that waits with a deadline (get, wait, multi_get) raises StoreTimeout at it,
  the client's own timeout; any other (set, add, compare_set, check, delete), sent or in
  flight, fails with StoreConnectionError once the client's kernel gives up retransmitting
  it (:data:`RETRANSMISSION_TIMEOUT` after it was sent), as c10d's client sees the socket
  break; that client's later calls then fail at once.
- Otherwise get/wait raise StoreTimeout at their deadline (client timeout; an explicit wait
  timeout overrides it).

Known simplification: a response already on its way is delivered even if a partition starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from elastic_sim.protocols.api import (
    Cancelled,
    Store,
    StoreConnectionError,
    StoreError,
    StoreTimeout,
)
from elastic_sim.sim.host import SimHost, SimProcess
from elastic_sim.sim.kernel import Call, Kernel
from elastic_sim.sim.network import Network
from elastic_sim.sim.tasks import Pending

SERVICE_TIME = 50e-6
"""Default server time per request (seconds)."""
RETRANSMISSION_TIMEOUT = 924.6
"""Seconds Linux retransmits data nobody acknowledges before it drops the connection
(``tcp_retries2`` = 15 with ``TCP_RTO_MIN`` 200 ms): how long a call to a powered-off
store's host lasts when no client timeout ends it first."""

_IN_FLIGHT, _HELD, _WAITING = 0, 1, 2


class _Req(Pending[Any]):
    """One request of one client."""

    __slots__ = ("a", "b", "client", "conn", "deadline", "expired", "keys", "op", "sent",
                 "sent_at", "state", "timer")

    def __init__(
        self, kernel: Kernel, conn: SimStore, op: str, keys: Sequence[str], a: Any, b: Any
    ) -> None:
        super().__init__(kernel)
        self.conn = conn
        """The client connection it was sent on."""
        self.client = conn.host
        self.op = op
        self.keys = keys
        self.a = a
        self.b = b
        self.deadline: float | None = None
        self.expired = False
        self.sent = False
        self.sent_at = kernel.now
        self.state = _IN_FLIGHT
        self.timer: Call | None = None
        """The deadline's callback, cancelled once the answer is sent: it would otherwise
        keep the request, its payload and its answer alive until the deadline (60 s by
        default: at 10,000 clients, every state a store served in the last minute)."""


class StoreServer:
    """A store hosted by one process; it dies with that process."""

    def __init__(self, registry: StoreRegistry, uid: int, addr: str, owner: SimProcess) -> None:
        self.registry = registry
        self.uid = uid
        self.addr = addr
        self.owner = owner
        self.host = owner.host
        self.alive = True
        self.data: dict[str, bytes] = {}
        self.waiting: dict[str, list[_Req]] = {}
        self.pending: dict[int, _Req] = {}
        self.held: list[_Req] = []
        self.busy_until = 0.0
        self.frozen = 0
        """How many store-freeze faults hold it now (it answers when 0)."""
        self.silent = False
        """Its host was powered off: it never answers again, and nothing tells its clients
        (they give up on their own timeouts)."""
        self.on_death: list[Callable[[], None]] = []
        self.clients: list[SimStore] = []
        """Its clients' connections (a connection reset breaks some)."""
        self._k = registry.kernel
        self._net = registry.network

    def reachable_from(self, host: SimHost) -> bool:
        """Whether a client on ``host`` can talk to this server now (a connection: both
        directions)."""
        return (self.alive and not self.frozen and self.owner.runnable
                and self._net.connected(host.name, self.host.name))

    # -- requests ----------------------------------------------------------------------

    def submit(self, req: _Req) -> None:
        """Send ``req`` towards the server."""
        self.pending[id(req)] = req
        self._k.call_later(self._net.latency(req.client.name, self.host.name), self._arrive, req,
                           lane=("store", req.client.name, self.addr))
        if req.deadline is not None:
            req.timer = self._k.call_at(req.deadline, self._expire, req)
        elif self.silent:
            self._give_up_later(req)

    def _arrive(self, req: _Req) -> None:
        if req.done or req.sent or not self.alive:
            return
        if self.reachable_from(req.client):
            self._serve(req)
        else:
            req.state = _HELD
            self.held.append(req)

    def _serve(self, req: _Req) -> None:
        req.state = _IN_FLIGHT
        if req.expired:
            self._respond(req, exc=StoreTimeout(f"{req.op} {list(req.keys)}: timeout"))
            return
        data, op, key = self.data, req.op, req.keys[0] if req.keys else ""
        if op == "set":
            data[key] = req.a
            self._respond(req, None)
            self._changed(key)
        elif op == "get":
            if key in data:
                self._respond(req, data[key])
            else:
                self._park(req, key)
        elif op == "add":
            cur = data.get(key)
            try:
                n = (int(cur) if cur is not None else 0) + req.a
            except ValueError:
                self._respond(req, exc=StoreError(f"add: value of {key!r} is not an integer"))
                return
            data[key] = str(n).encode()
            self._respond(req, n)
            self._changed(key)
        elif op == "compare_set":
            cur, expected, desired = data.get(key), req.a, req.b
            if (cur is None and expected == b"") or (cur is not None and cur == expected):
                data[key] = desired
                self._respond(req, desired)
                self._changed(key)
            else:
                self._respond(req, expected if cur is None else cur)
        elif op == "wait" or op == "multi_get":
            missing = next((k for k in req.keys if k not in data), None)
            if missing is not None:
                self._park(req, missing)
            elif op == "wait":
                self._respond(req, None)
            else:
                self._respond(req, [data[k] for k in req.keys])
        elif op == "check":
            self._respond(req, all(k in data for k in req.keys))
        elif op == "delete":
            self._respond(req, data.pop(key, None) is not None)
        else:  # pragma: no cover - the client only sends the ops above
            self._respond(req, exc=StoreError(f"unknown op {op}"))

    def _park(self, req: _Req, key: str) -> None:
        req.state = _WAITING
        self.waiting.setdefault(key, []).append(req)

    def _changed(self, key: str) -> None:
        parked = self.waiting.pop(key, None)
        if not parked:
            return
        for req in parked:
            if req.done or req.sent or req.state != _WAITING:
                continue
            if self.reachable_from(req.client):
                self._serve(req)
            else:
                req.state = _HELD
                self.held.append(req)

    def _respond(self, req: _Req, value: Any = None, exc: BaseException | None = None) -> None:
        now = self._k.now
        t = (now if now > self.busy_until else self.busy_until) + self.registry.service_time
        self.busy_until = t
        req.sent = True
        if req.timer is not None:
            req.timer.cancel()  # _expire would do nothing now
            req.timer = None
        self.pending.pop(id(req), None)
        back = self._net.latency(self.host.name, req.client.name)
        self._k.call_at(t + back, req.resolve, value, exc, True,
                        lane=("store-reply", self.addr, req.client.name))

    def _expire(self, req: _Req) -> None:
        if req.done or req.sent or not self.alive:
            return
        if self.silent or self.reachable_from(req.client):
            req.state = _IN_FLIGHT  # a parked entry is skipped from now on
            self.pending.pop(id(req), None)
            req.resolve(exc=StoreTimeout(f"{req.op} {list(req.keys)}: timeout"), direct=True)
            return
        req.expired = True  # answered with StoreTimeout when the server can answer
        if req.state == _WAITING:
            req.state = _HELD
            self.held.append(req)

    def retry_held(self) -> None:
        """Serve held requests whose client can reach the server now, in arrival order."""
        if not self.held or not self.alive:
            return
        held, self.held = self.held, []
        for req in held:
            if req.done or req.sent or req.state != _HELD:
                continue
            if self.reachable_from(req.client):
                self._serve(req)
            else:
                self.held.append(req)

    def reset(self, crosses: Callable[[str, str], bool]) -> None:
        """The connections of clients on other hosts ``x`` with ``crosses(server host, x)``
        are reset: their calls in flight fail now, and those clients' later calls too
        (c10d's client never reconnects); clients that connect afterwards are served."""
        here = self.host.name

        def hit(host: SimHost) -> bool:
            return host.name != here and crosses(here, host.name)
        for client in self.clients:
            if client.broken is None and hit(client.host):
                client.broken = f"store {self.addr}: connection reset by peer"
        self.clients = [c for c in self.clients if c.broken is None]
        for key, req in list(self.pending.items()):
            if not req.done and not req.sent and hit(req.client):
                del self.pending[key]
                if req.timer is not None:
                    req.timer.cancel()
                    req.timer = None
                req.state = _IN_FLIGHT  # skipped wherever it is parked or held
                req.resolve(exc=StoreConnectionError(
                    f"store {self.addr}: connection reset by peer"))

    def go_silent(self) -> None:
        """The server's host was powered off: nothing answers its clients again. A pending
        call with a deadline ends at it (one already past it, now); any other when its
        sender's kernel stops retransmitting it."""
        self.silent = True
        for req in list(self.pending.values()):
            if req.done or req.sent:
                continue
            if req.deadline is None:
                self._give_up_later(req)
            elif req.expired:
                self._expire(req)

    def _give_up_later(self, req: _Req) -> None:
        at = max(self._k.now, req.sent_at + RETRANSMISSION_TIMEOUT)
        req.timer = self._k.call_at(at, self._give_up, req)

    def _give_up(self, req: _Req) -> None:
        if req.done or req.sent or not self.alive:
            return
        req.state = _IN_FLIGHT  # skipped wherever it is held
        self.pending.pop(id(req), None)
        why = f"store {self.addr}: connection timed out (no answer from its host)"
        req.conn.broken = why  # the kernel dropped the connection: later calls fail at once
        req.resolve(exc=StoreConnectionError(why), direct=True)

    def die(self) -> None:
        """The server's process ended: every pending call fails now, later ones at once."""
        if not self.alive:
            return
        self.alive = False
        self.registry.forget(self)
        for req in list(self.pending.values()):
            req.resolve(exc=StoreConnectionError(f"store {self.addr} is gone"))
        self.pending.clear()
        self.held.clear()
        self.waiting.clear()
        hooks, self.on_death = self.on_death, []
        for hook in hooks:
            hook()


class StoreRegistry:
    """Every live store server of the run, by address ``host:port``."""

    def __init__(self, kernel: Kernel, network: Network, service_time: float = SERVICE_TIME):
        self.kernel = kernel
        self.network = network
        self.service_time = service_time
        self.servers: dict[str, StoreServer] = {}
        self._uid = 0

    def host(self, owner: SimProcess, port: int) -> StoreServer:
        """Start a server in ``owner`` on ``port`` (0: the host's next free port from 29500)."""
        host = owner.host
        if port == 0:
            while f"{host.name}:{host.next_port}" in self.servers:
                host.next_port += 1
            port = host.next_port
            host.next_port += 1
        addr = f"{host.name}:{port}"
        if addr in self.servers:
            raise StoreError(f"address {addr} already in use")
        self._uid += 1
        server = StoreServer(self, self._uid, addr, owner)
        self.servers[addr] = server
        # A powered-off owner says nothing: the server stays listed but never answers again
        # (its owner never runs); its clients give up on their own timeouts.
        owner.on_death.append(lambda: server.go_silent() if owner.host.powered_off
                              else server.die())
        return server

    def lookup(self, addr: str) -> StoreServer | None:
        """The live server at ``addr``, if any."""
        return self.servers.get(addr)

    def forget(self, server: StoreServer) -> None:
        """A server died: free its address."""
        if self.servers.get(server.addr) is server:
            del self.servers[server.addr]

    def retry_all(self) -> None:
        """Something may be reachable again: serve what was held."""
        for server in list(self.servers.values()):
            server.retry_held()


class SimStore(Store):
    """A client of one server, used by one process; it never reconnects."""

    def __init__(self, server: StoreServer, proc: SimProcess, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self._proc = proc
        self.host = proc.host
        self.broken: str | None = None
        """Why its connection is gone (reset), if it is."""
        server.clients.append(self)

    async def _call(
        self, op: str, keys: Sequence[str], a: Any = None, b: Any = None, wait: float | None = None
    ) -> Any:
        if not self._proc.alive:
            raise Cancelled("process is dead")
        server = self.server
        if not server.alive:
            raise StoreConnectionError(f"store {server.addr} is gone")
        if self.broken is not None:
            raise StoreConnectionError(self.broken)
        k = server.registry.kernel
        req = _Req(k, self, op, keys, a, b)
        if wait is not None:
            req.deadline = k.now + wait
        server.submit(req)
        return await req

    async def set(self, key: str, value: bytes) -> None:
        """Write ``value`` under ``key``."""
        await self._call("set", [key], _bytes(value))

    async def get(self, key: str) -> bytes:
        """Read ``key``, waiting for it up to the client's timeout."""
        out: bytes = await self._call("get", [key], wait=self.timeout)
        return out

    async def add(self, key: str, amount: int) -> int:
        """Atomically add to the integer under ``key``; return the new value."""
        out: int = await self._call("add", [key], int(amount))
        return out

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        """Atomic compare-and-set with c10d's semantics."""
        out: bytes = await self._call("compare_set", [key], _bytes(expected), _bytes(desired))
        return out

    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        """Wait until every key exists; StoreTimeout after ``timeout`` (default: client's)."""
        await self._call("wait", list(keys), wait=self.timeout if timeout is None else timeout)

    async def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists, without waiting."""
        out: bool = await self._call("check", list(keys))
        return out

    async def delete(self, key: str) -> bool:
        """Delete ``key``; whether it existed."""
        out: bool = await self._call("delete", [key])
        return out

    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Read every key in one request, waiting for all up to the client's timeout."""
        if not keys:
            return []
        out: list[bytes] = await self._call("multi_get", list(keys), wait=self.timeout)
        return out


def _bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"store values are bytes, not {type(value).__name__}")
    return bytes(value)
