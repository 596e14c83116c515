"""SimRuntime: :class:`elastic_sim.protocols.api.Runtime` on virtual time, one instance per process.

A runtime call made by a process that is already dead (a killed process's coroutine
running its ``finally`` blocks while it is closed) has no effect: ``record`` and ``send``
do nothing, awaited operations raise :class:`~elastic_sim.protocols.api.Cancelled`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from elastic_sim.protocols.api import (
    HANDLED_SIGNALS,
    JSON,
    Cancelled,
    DiscoveryOverlay,
    Future,
    Group,
    KernelSockets,
    Message,
    Negotiation,
    PrefixStore,
    Proc,
    ProcessInfo,
    Runtime,
    Store,
    StoreConnectionError,
    Task,
    Timer,
)
from elastic_sim.sim.host import Cluster, SimHost, SimProcess, json_copy
from elastic_sim.sim.store import SimStore
from elastic_sim.sim.tasks import Alarm, SimFuture, Sleep
from elastic_sim.sim.ticks import Ticks

if TYPE_CHECKING:
    from elastic_sim.sim.run import Simulation

T = TypeVar("T")

CONNECT_RETRY_FIRST = 0.1
"""First back-off of a store connect to an absent server (doubles up to the cap)."""
CONNECT_RETRY_MAX = 1.0


def _unknown() -> float:
    """No hint: ``idle()`` may turn False at any tick."""
    return -math.inf


class SimRuntime(Runtime):
    """The runtime of one simulated process."""

    def __init__(self, sim: Simulation, proc: SimProcess) -> None:
        self._sim = sim
        self._k = sim.kernel
        self._proc = proc
        self.info = ProcessInfo(host=proc.host.name, name=proc.name, env=dict(proc.env),
                                pid=proc.pid, incarnation=proc.incarnation)
        self.rng = random.Random(f"{sim.seed}/proc/{proc.name}/{proc.incarnation}")
        self._wake_latency = sim.world.wake_latency

    def _alive(self) -> None:
        if not self._proc.alive:
            raise Cancelled("process is dead")

    # -- time --------------------------------------------------------------------------

    def now(self) -> float:
        """This host's wall clock: offset + (1 + drift) * true time."""
        return self._proc.host.clock.wall(self._k.now)

    def monotonic(self) -> float:
        """Seconds since this process started, on its host's drifting monotonic clock."""
        return self._proc.host.clock.monotonic(self._k.now, self._proc.start_time)

    async def sleep(self, seconds: float) -> None:
        """Suspend this task for ``seconds`` virtual seconds (longer on a straggler), waking
        the world's ``wake_latency`` late as a real sleep does."""
        self._alive()
        if seconds > 0.0:
            seconds = seconds * self._proc.host.slowdown + self._wake_latency
        await Sleep(self._k, seconds)

    async def spend(self, seconds: float) -> None:
        """Charge ``seconds`` of upstream's CPU time (longer on a straggler; no wake-up
        latency: nothing sleeps). Nothing at all for 0."""
        self._alive()
        if seconds > 0.0:
            await Sleep(self._k, seconds * self._proc.host.slowdown)

    async def poll(self, interval: float, idle: Callable[[], bool],
                   until: Callable[[], float] | None = None) -> None:
        """:meth:`Runtime.poll`; at the fast fidelity no task step and no kernel event per
        idle tick: ``idle()`` is asked at the grid ticks where it may be False
        (:mod:`elastic_sim.sim.ticks`), and the task wakes at the first where it is (or where the
        task cannot run: then it wakes as from a sleep, held as a sleep's wake-up would be)."""
        self._alive()
        if interval <= 0.0 or not self._sim.stretches.enabled:
            await super().poll(interval, idle, until)
            return
        await Ticks(self._k, self._sim.ticks, self._proc, interval, self._wake_latency, idle,
                    until or _unknown)

    # -- memos -------------------------------------------------------------------------

    def shared(self, name: str, make: Callable[[], T]) -> T:
        """:meth:`Runtime.shared`: one object per run, for all its processes (the sim's
        store hands a reader the bytes object its writer stored)."""
        memos = self._sim.memos
        if name not in memos:
            memos[name] = make()
        return cast(T, memos[name])

    # -- concurrency -------------------------------------------------------------------

    def future(self) -> Future[Any]:
        """A new unresolved future."""
        return SimFuture(self._k)

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task[T]:
        """Run ``coro`` as a task of this process, from the current time."""
        return self._proc.spawn(coro, name or "task")

    def after(self, seconds: float, fn: Callable[[], None]) -> Timer:
        """:meth:`Runtime.after` as one kernel callback (:class:`~elastic_sim.sim.tasks.Alarm`), due
        when a task sleeping ``seconds`` from now would wake; none in a process that is
        exiting, which starts no task. A run with a tie seed keeps the task: its same-time
        order (the timer's own lane) is what such a run explores, as it does step by
        step what the fast fidelity summarises."""
        if self._k.tie_seed is not None:
            return super().after(seconds, fn)
        proc = self._proc
        if seconds > 0.0:
            seconds = seconds * proc.host.slowdown + self._wake_latency
        alarm = Alarm(self._k, proc, seconds, fn)
        if not proc.alive or proc.exiting:
            alarm.cancel()
        return alarm

    # -- messages ----------------------------------------------------------------------

    def send(self, dst: str, body: Mapping[str, JSON],
             refused: Mapping[str, JSON] | None = None) -> None:
        """Send a JSON object to ``dst``; it arrives after the path latency, or is lost; to
        a process that ended on a live host without sockets of its own, ``refused``
        comes back instead (the host's kernel's RST).

        The body travels as JSON (what the real runtime could not send is refused here too,
        and the receiver gets a copy: tuples become lists, keys become strings)."""
        copy = _json_copy(body)
        proc = self._proc
        if proc.alive:
            _transmit(self._sim, proc.name, proc.host.name, dst, copy, refused)

    def recv(self, timeout: float | None = None) -> Coroutine[Any, Any, Message]:
        """Next message of this process's mailbox; OperationTimeout after ``timeout``."""
        self._alive()
        return self._proc.mailbox.recv(timeout)

    def answer_in_kernel(
        self, answer: Callable[[Message], Mapping[str, JSON] | None] | None
    ) -> None:
        """Answer some messages on arrival, even while this process is stopped or its host
        frozen (the kernel answers a SYN for a listening socket)."""
        self._proc.kernel_answer = answer

    def close_in_kernel(self, sockets: KernelSockets | None) -> None:
        """At an exit while the host lives, send ``sockets.closing()`` from the host; then
        let the host answer messages to this name with ``sockets.after_exit``."""
        proc = self._proc
        if proc.kernel_sockets is None and sockets is not None:
            proc.on_death.append(self._sockets_closed)
        proc.kernel_sockets = sockets

    def _sockets_closed(self) -> None:
        proc = self._proc
        sockets = proc.kernel_sockets
        if sockets is None or proc.host.down:
            return  # nothing leaves a dead machine
        proc.host.closed[proc.name] = sockets
        for dst, body in sockets.closing():
            _transmit(self._sim, proc.name, proc.host.name, dst, _json_copy(body))

    def on_conn_reset(self, handler: Callable[[Callable[[str], bool]], None] | None) -> None:
        """Called by the conn_reset fault (:mod:`elastic_sim.sim.fault_handlers`)."""
        self._proc.conn_reset = handler

    # -- store -------------------------------------------------------------------------

    async def host_store(self, port: int) -> str:
        """Start a store server in this process (it dies with it); return ``host:port``."""
        self._alive()
        return self._sim.stores.host(self._proc, port).addr

    async def connect_store(self, addr: str, timeout: float) -> Store:
        """A client of the store at ``addr``: retries with back-off while no server answers
        there, StoreConnectionError at ``timeout``; the handshake costs a round trip."""
        self._alive()
        k, proc, net = self._k, self._proc, self._sim.network
        deadline = k.now + timeout
        backoff = CONNECT_RETRY_FIRST
        while True:
            server = self._sim.stores.lookup(addr)
            if server is not None and server.reachable_from(proc.host):
                await Sleep(k, 2 * net.latency(proc.host.name, server.host.name))
                if server.alive:
                    return SimStore(server, proc, timeout)
            left = deadline - k.now
            if left <= 0:
                raise StoreConnectionError(f"no store server at {addr} within {timeout}s")
            await Sleep(k, min(backoff, left))
            backoff = min(2 * backoff, CONNECT_RETRY_MAX)

    # -- process groups ----------------------------------------------------------------

    def default_group_timeout(self) -> float:
        """The default timeout of the run's collective profile (Gloo's or NCCL's)."""
        return self._sim.world.collectives.default_timeout

    async def _new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float,
        negotiation: Negotiation | None = None,
    ) -> Group:
        """Join group ``name``: a rendezvous of ``size`` ranks through ``store``'s server."""
        self._alive()
        inner = store
        while isinstance(inner, PrefixStore):
            inner = inner.inner
        if not isinstance(inner, SimStore):
            raise TypeError(f"a sim group needs a sim store, not {type(store).__name__}")
        return await self._sim.collectives.join(
            self._proc, inner.server, name, rank, size, timeout, negotiation
        )

    # -- processes ---------------------------------------------------------------------

    async def start_process(
        self, name: str, entry: str, args: Mapping[str, JSON], env: Mapping[str, str] | None = None
    ) -> Proc:
        """Start child ``host/name`` on this host, now; it outlives this process."""
        self._alive()
        if not name or "/" in name:
            raise ValueError(f"bad process name {name!r}")
        child_args = json_copy(args, "process args")
        child_env = {str(k): str(v) for k, v in (env or {}).items()}
        child = self._sim.cluster.start(self._proc.host, name, entry, child_args, child_env,
                                        self._sim.world.process_start)
        return SimProc(self._sim.cluster, child, self._proc)

    def detach(self) -> None:
        """:meth:`Runtime.detach`."""
        self._sim.cluster.detach(self._proc)

    def on_signal(self, sig: str, handler: Callable[[], None] | None) -> None:
        """Install (or remove) a handler for one of HANDLED_SIGNALS: it runs when the signal
        arrives."""
        if sig not in HANDLED_SIGNALS:
            raise ValueError(f"only {', '.join(HANDLED_SIGNALS)} can be handled, not {sig!r}")
        if handler is None:
            self._proc.handlers.pop(sig, None)
        else:
            self._proc.handlers[sig] = handler

    # -- discovery ---------------------------------------------------------------------

    def discovery_overlay(self) -> DiscoveryOverlay:
        """The run's discovery-source faults in effect now (see :mod:`elastic_sim.sim.faults`)."""
        return self._sim.injector.discovery_overlay()

    # -- trace -------------------------------------------------------------------------

    def record(self, kind: str, **fields: JSON) -> None:
        """Emit one trace event of this process (nothing once it is dead). The fields are
        copied as the trace file will hold them (JSON, no NaN): a later change to a list the
        caller passed does not change the event, and what cannot be traced fails here."""
        if self._proc.alive:
            data = _json_copy(fields, allow_nan=False)
            self._k.trace(self._proc.host.name, self._proc.name, kind, data)


_PLAIN = (str, int, bool, type(None))
_INF = float("inf")


class _NotPlain(Exception):
    """A value the fast copy leaves to JSON (a non-str key, a non-finite float, ...)."""


def _plain(v: Any) -> Any:
    """``v`` as it comes out of JSON, for the common shapes: str keys, lists and tuples
    (lists after), str/int/bool/None and finite floats (``repr`` gives them back exactly);
    anything else raises :class:`_NotPlain`."""
    t = type(v)
    if t in _PLAIN or (t is float and -_INF < v < _INF):
        return v
    if t is list or t is tuple:
        return [_plain(x) for x in v]
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _NotPlain
            out[k] = _plain(x)
        return out
    raise _NotPlain


class SimProc(Proc):
    """The handle a parent holds on a child process."""

    def __init__(self, cluster: Cluster, proc: SimProcess, parent: SimProcess) -> None:
        self.name = proc.name
        self._cluster = cluster
        self._proc = proc
        self._parent = parent

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        return self._proc.exit_code

    async def wait(self) -> int:
        """Wait for the exit code (negative: killed by that signal number)."""
        return await self._proc.exited

    def signal(self, sig: str) -> None:
        """Deliver TERM, KILL, STOP, CONT or INT; nothing if it has exited, or if the
        parent has (a SIGKILLed parent runs no ``finally``: the sim closes its coroutines,
        which runs theirs, but what they would signal is not sent)."""
        if not self._parent.alive:
            return
        self._cluster.signal(self._proc, sig)


def _json_copy(body: Mapping[str, JSON], allow_nan: bool = True) -> dict[str, JSON]:
    """A copy of ``body`` as it comes out of JSON; TypeError/ValueError if it cannot.
    Plain bodies (str keys, lists, tuples, finite numbers, str, bool, None) are copied
    directly; the rest (keys JSON would turn into strings, NaN, other types) go through
    JSON itself."""
    if type(body) is dict:
        for k, v in body.items():
            if type(k) is not str or not (
                type(v) in _PLAIN or (type(v) is float and -_INF < v < _INF)
            ):
                break
        else:
            return dict(body)  # flat and plain (most trace events): no call per field
        try:
            out: dict[str, JSON] = _plain(body)
            return out
        except (_NotPlain, RecursionError):  # (a cycle: JSON says so, a ValueError)
            pass
    if not isinstance(body, Mapping):
        raise TypeError(f"a JSON object is expected, not {type(body).__name__}")
    out = json.loads(json.dumps(body, allow_nan=allow_nan))
    return out


def _transmit(sim: Simulation, src: str, src_host: str, dst: str, body: dict[str, JSON],
              refused: Mapping[str, JSON] | None = None) -> None:
    """Send ``body`` (copied already) from process ``src`` on ``src_host`` to ``dst``:
    it arrives after the path latency, or is lost; to a process that ended while its host
    lives, the host's kernel answers it (:meth:`SimRuntime.close_in_kernel`), or, where
    the process left no sockets of its own, sends ``refused`` back if given (copied only
    then: a send's common path pays nothing for it)."""
    target = sim.cluster.procs.get(dst)
    if target is None:
        host = sim.cluster.hosts.get(dst.partition("/")[0])
        if host is None:
            return
        if dst in host.closed:
            arrive: Callable[..., None] = _arrive_closed
        elif refused is not None and dst in host.ended:
            arrive, body = _arrive_refused, _json_copy(refused)
        else:
            return
        for delay in sim.network.transmit(src_host, host.name):
            sim.kernel.call_later(delay, arrive, sim, host, dst, Message(src, body),
                                  lane=("msg", src, dst))
        return
    for delay in sim.network.transmit(src_host, target.host.name):
        sim.kernel.call_later(delay, _arrive, target, Message(src, body),
                              lane=("msg", src, dst))


def _arrive_closed(sim: Simulation, host: SimHost, dst: str, msg: Message) -> None:
    sockets = host.closed.get(dst)
    if sockets is None or host.down:
        return
    reply = sockets.after_exit(msg)
    if reply is not None:
        _transmit(sim, dst, host.name, msg.src, _json_copy(reply))


def _arrive_refused(sim: Simulation, host: SimHost, dst: str, msg: Message) -> None:
    """A connection to ``dst``, which ended without sockets of its own, reaches its host:
    unless the host went down or ``dst`` started again meanwhile, the kernel sends the
    sender's ``refused`` body (``msg.body``) back."""
    if host.down or dst not in host.ended:
        return
    _transmit(sim, dst, host.name, msg.src, _json_copy(msg.body))


def _arrive(target: SimProcess, msg: Message) -> None:
    if not target.alive:
        return
    answer = target.kernel_answer
    reply = answer(msg) if answer is not None else None
    if reply is None:
        target.mailbox.deliver(msg)
    elif target.rt is not None:
        target.rt.send(msg.src, reply)  # the kernel answers, running or stopped
