"""The runtime: everything a protocol process may do (:class:`Runtime`, one instance per
process), who the process is, the discovery faults in effect, and how a process's entry is
named and found."""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from elastic_sim.protocols.api.concurrency import Future, T, Task, TaskTimer, Timer
from elastic_sim.protocols.api.errors import CollectiveError, OperationTimeout
from elastic_sim.protocols.api.group import Group, Negotiation, TracedGroup, blamed
from elastic_sim.protocols.api.message import JSON, Message
from elastic_sim.protocols.api.process import Proc
from elastic_sim.protocols.api.store import Store


@dataclass(frozen=True)
class DiscoveryOverlay:
    """What discovery-source faults (scheduled by the run, cluster-wide) do right now to
    what a protocol's discovery source reports: ``added`` lines (``host`` or
    ``host:slots``) to append, ``removed`` hosts to drop, the script failing (``error``),
    or a call started now hanging for ``hang_s`` more seconds. Empty without such faults."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    error: bool = False
    hang_s: float = 0.0


NO_DISCOVERY_FAULTS = DiscoveryOverlay()
"""The overlay of a run without discovery-source faults."""


@dataclass
class ProcessInfo:
    """Who this process is: its host, its name (``host/name``), its environment, its
    process id (real pid; in the sim, handed out deterministically in start order) and
    its incarnation: how many processes of this name its host started before (0 for the
    first; a host brought back after a crash starts its first process again as 1)."""

    host: str
    name: str
    env: dict[str, str] = field(default_factory=dict)
    pid: int = 0
    incarnation: int = 0


class KernelSockets(Protocol):
    """What a host's kernel says for a process's TCP sockets once the process has ended
    (:meth:`Runtime.close_in_kernel`)."""

    def closing(self) -> Sequence[tuple[str, Mapping[str, JSON]]]:
        """``(dst, body)`` for each connection still open at the exit (its FIN or RST)."""

    def after_exit(self, msg: Message) -> Mapping[str, JSON] | None:
        """The kernel's answer to ``msg`` arriving after the exit (an RST), or None."""


class Runtime(abc.ABC):
    """Everything a protocol process may do. One instance per process."""

    info: ProcessInfo
    rng: random.Random
    """A seeded random stream of this process (in the sim: a named sub-stream of the run's seed)."""

    @property
    def host(self) -> str:
        """The host this process runs on."""
        return self.info.host

    @property
    def name(self) -> str:
        """This process's address, ``host/name``."""
        return self.info.name

    # -- time --------------------------------------------------------------------------

    @abc.abstractmethod
    def now(self) -> float:
        """This host's wall clock in seconds (may be offset, drift and jump: clock skew)."""

    @abc.abstractmethod
    def monotonic(self) -> float:
        """This process's monotonic clock in seconds (drifts with the host, never jumps)."""

    @abc.abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Suspend this task for ``seconds``."""

    async def spend(self, seconds: float) -> None:
        """Work that takes ``seconds`` of CPU time upstream and that the protocol does not
        do itself (pickling a state the model keeps as JSON, say): the sim charges it as
        time passing in this task; a real process does its own work, so by default this
        returns at once, without yielding."""
        del seconds  # a real process spends its own

    async def poll(self, interval: float, idle: Callable[[], bool],
                   until: Callable[[], float] | None = None) -> None:
        """A polling loop's wait: ``sleep(interval)``, then again as long as ``idle()``
        holds after a sleep. ``idle`` only reads state of this process (its own, its
        children's exit codes, signals it got), and must be True only where one turn of
        the caller's loop would do nothing (no await that takes time, no trace event, no
        change; a zero-time :func:`yield_point` only reorders what is due at the same
        instant, which the fast fidelity does not vary: runs with a tie seed, which do,
        run every turn). ``until``, asked where ``idle()`` is True, is the earliest
        :meth:`monotonic` reading at which it may turn False if nothing else changes
        (``math.inf``: never; None or ``-math.inf``: at any tick). The sim at its fast
        fidelity asks ``idle()`` only at the ticks where it may be False, without waking
        the task (no coroutine step, no kernel event per idle tick); other runtimes loop
        and ignore ``until``."""
        del until  # a hint for runtimes that skip ticks
        await self.sleep(interval)
        while idle():
            await self.sleep(interval)

    # -- concurrency -------------------------------------------------------------------

    @abc.abstractmethod
    def future(self) -> Future[Any]:
        """A new unresolved future owned by this process."""

    @abc.abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task[T]:
        """Run ``coro`` concurrently in this process; it dies with the process."""

    def after(self, seconds: float, fn: Callable[[], None]) -> Timer:
        """Call ``fn()`` in this process once ``seconds`` have passed as :meth:`sleep`
        measures them (a task that sleeps, then calls: late on a straggler, held while
        the process is stopped, never once it died); a timeout's timer. A runtime may do
        the same without a task."""
        return TaskTimer(self.spawn(self._timer(seconds, fn), "timeout"))

    async def wait_for(self, aw: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``aw`` with a deadline: cancel it and raise :class:`OperationTimeout` after
        ``timeout`` seconds (None: no deadline)."""
        if timeout is None:
            return await aw
        task = self.spawn(aw, "wait_for")
        done = self.future()

        def _finish(_: Any = None) -> None:
            if not done.done():
                done.set_result(None)

        timer = self.spawn(self._timer(timeout, _finish), "wait_for.timer")
        waiter = self.spawn(self._join_then(task, _finish), "wait_for.join")
        await done
        if task.done():
            timer.cancel()
            return await task
        task.cancel()
        waiter.cancel()
        raise OperationTimeout(f"no result within {timeout}s")

    async def _timer(self, seconds: float, then: Callable[[], None]) -> None:
        await self.sleep(seconds)
        then()

    @staticmethod
    async def _join_then(task: Task[Any], then: Callable[[], None]) -> None:
        try:
            await task
        except BaseException:  # the caller re-awaits the task and sees the error itself
            pass
        then()

    # -- messages ----------------------------------------------------------------------

    @abc.abstractmethod
    def send(self, dst: str, body: Mapping[str, JSON],
             refused: Mapping[str, JSON] | None = None) -> None:
        """Send a JSON object to process ``dst`` (``host/name``); fire and forget.

        A message to a dead process or across a cut link is lost; to a paused host it is
        delivered when the host resumes. ``refused`` (a connection attempt's: a SYN) is
        what the destination host's kernel sends back, from ``dst``, when nothing listens
        there: ``dst`` ended (or failed at start) while its host lives, and left no
        sockets of its own to answer for it (:meth:`close_in_kernel`), so the kernel
        resets the connection at once instead of leaving it to time out. Runtimes whose
        messages do not model a host's kernel (a real process) ignore it."""

    @abc.abstractmethod
    async def recv(self, timeout: float | None = None) -> Message:
        """Next message of this process's mailbox; :class:`OperationTimeout` after ``timeout``."""

    # -- store -------------------------------------------------------------------------

    @abc.abstractmethod
    async def host_store(self, port: int) -> str:
        """Start a store server inside this process (it dies with it); return its address."""

    @abc.abstractmethod
    async def connect_store(self, addr: str, timeout: float) -> Store:
        """A client of the store at ``addr``; ``timeout`` bounds connect and get/wait.

        Raises :class:`StoreConnectionError` if no server answers within ``timeout``."""

    # -- process groups ----------------------------------------------------------------

    @abc.abstractmethod
    def default_group_timeout(self) -> float:
        """The timeout (s) of a group whose program sets none: the default of the backend
        this runtime's groups use (Gloo's 30 min, NCCL's 10; see
        :mod:`elastic_sim.world`), as torch's ``_get_default_timeout`` picks it."""

    async def new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float,
        negotiation: Negotiation | None = None,
    ) -> TracedGroup:
        """Join the process group ``name`` (one per epoch) through ``store``.

        Returns when all ``size`` members have joined; :class:`CollectiveTimeout` if they do
        not within ``timeout`` (which also bounds every collective of the group, except in a
        ``negotiation`` group: see :class:`Negotiation`; runtimes that cannot negotiate, a
        real Gloo group, run its collectives as any others)."""
        self.record("group_init", group=name, rank=rank, size=size)
        try:
            inner = await self._new_group(store, name, rank, size, timeout, negotiation)
        except CollectiveError as exc:
            self.record("group_failed", group=name, rank=rank, size=size,
                        error=type(exc).__name__, **blamed(exc))
            raise
        self.record("group_ready", group=name, rank=rank, size=size)
        return TracedGroup(self, inner)

    @abc.abstractmethod
    async def _new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float,
        negotiation: Negotiation | None = None,
    ) -> Group:
        """Create the runtime's group (Gloo in real mode)."""

    # -- processes ---------------------------------------------------------------------

    @abc.abstractmethod
    async def start_process(
        self, name: str, entry: str, args: Mapping[str, JSON], env: Mapping[str, str] | None = None
    ) -> Proc:
        """Start a child process ``host/name`` on this host running ``entry``
        (``"module:function"``, an :data:`Entry`) with ``args``."""

    def answer_in_kernel(
        self, answer: Callable[[Message], Mapping[str, JSON] | None] | None
    ) -> None:
        """Let this host's kernel answer some messages for this process (a TCP SYN to a
        listening socket is answered by the kernel, even while the process is stopped):
        ``answer(msg)`` returns the body sent back to ``msg.src`` at once, and the message
        is consumed, or None to deliver it as usual. By default (a real process) the
        answer is given when the process takes the message from its mailbox."""
        self._kernel_answer = answer

    def close_in_kernel(self, sockets: KernelSockets | None) -> None:
        """Let this host's kernel speak for this process's TCP sockets once the process has
        ended while its host lives: at the exit it sends what ``sockets.closing()`` lists
        (a FIN or RST on each open connection), and later messages to the process get
        ``sockets.after_exit(msg)`` back (an RST to a closed port), until the host goes
        down or a process of the same name starts there. Nothing leaves a host that
        crashed or lost power. Runtimes whose messages do not model a host's kernel (a real
        process: its real sockets close, which its message layer does not surface) keep
        ``sockets`` and never call it."""
        self._kernel_sockets = sockets

    def on_conn_reset(self, handler: Callable[[Callable[[str], bool]], None] | None) -> None:
        """Be told when a ``conn_reset`` fault resets this process's connections:
        ``handler(hit)``, where ``hit(host)`` says whether its connections with processes
        on ``host`` were reset (never its own host's: loopback is not reset). Runtimes whose
        messages carry no connections of the protocol's own (a real process: the fault
        resets its real sockets, which its message layer does not surface) keep the
        handler and never call it."""
        self._conn_reset_handler = handler

    async def _take(self, msg: Message) -> Message | None:
        """``msg``, or None once the kernel answer consumed it (the default hook)."""
        answer: Callable[[Message], Mapping[str, JSON] | None] | None = getattr(
            self, "_kernel_answer", None)
        reply = answer(msg) if answer is not None else None
        if reply is None:
            return msg
        self.send(msg.src, reply)
        return None

    @abc.abstractmethod
    def detach(self) -> None:
        """This process stands for a daemon outside the job (the sshd a protocol's ssh hop
        goes through, say): the run does not wait for it. Once every other process of the
        run has ended and no host is still to start, the run ends, and a daemon still
        running then is stopped without an exit code or a ``proc_exit`` (upstream's daemon
        simply stays). Its children are the job's: the run waits for them."""

    @abc.abstractmethod
    def on_signal(self, sig: str, handler: Callable[[], None] | None) -> None:
        """Install (or, with None, remove) a handler for one of :data:`HANDLED_SIGNALS`;
        by default they kill."""

    # -- discovery ---------------------------------------------------------------------

    @abc.abstractmethod
    def discovery_overlay(self) -> DiscoveryOverlay:
        """The discovery-source faults in effect now, for a protocol's discovery source to
        apply to each call. Calling it declares that this process runs a discovery source:
        a run where no process ever does reports its discovery faults as not fired."""

    # -- memos -------------------------------------------------------------------------

    def shared(self, name: str, make: Callable[[], T]) -> T:
        """The object ``name`` of the processes that can hand this one the very objects
        they made, made by ``make()`` when first asked for: where a memo keyed by object
        identity lives (what a value written to the store stands for, say:
        :mod:`elastic_sim.protocols.torchelastic.memo`), never in a module. A real process
        gets objects over the wire only, so by default the object is its own; the sim,
        whose store hands a reader the writer's very bytes, gives one to all the processes
        of a run. What a protocol keeps there may change its speed, never its results."""
        memos: dict[str, Any] | None = getattr(self, "_memos", None)
        if memos is None:
            memos = {}
            self._memos: dict[str, Any] = memos
        if name not in memos:
            memos[name] = make()
        return cast(T, memos[name])

    # -- trace -------------------------------------------------------------------------

    @abc.abstractmethod
    def record(self, kind: str, **fields: JSON) -> None:
        """Append one event to the run's trace, stamped with the run's time and this process."""


async def yield_point(rt: Runtime, upstream: str) -> None:
    """A point where upstream releases the GIL or a lock between two steps, so another
    thread can run there: a zero-time yield to the scheduler. In the sim, what else is due
    at this instant may run before the rest of this task (in an order ``explore --ties``
    varies); on asyncio, other ready tasks run. ``upstream`` names the line it models."""
    del upstream  # documentation at the call site, kept greppable
    await rt.sleep(0.0)


Entry = Callable[[Runtime, Mapping[str, JSON]], Coroutine[Any, Any, int]]
"""A process's main: ``async def main(rt, args) -> exit code``, named as ``"module:function"``."""


def resolve_entry(entry: str) -> Entry:
    """Import ``"module:function"``. Runtimes use it to start processes by name."""
    import importlib

    mod_name, _, fn_name = entry.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"entry {entry!r}: expected 'module:function'")
    fn = getattr(importlib.import_module(mod_name), fn_name)
    return fn  # type: ignore[no-any-return]
