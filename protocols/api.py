"""The runtime contract: the only thing protocol code may import.

Protocol code is plain ``async def`` code that awaits operations of a :class:`Runtime`
handed to it. The simulator drives these coroutines on virtual time; the real runtime
drives the very same coroutines on asyncio over TCP, a TCPStore and Gloo. Between two
awaits a coroutine runs atomically in both runtimes, so interleavings happen only at
awaits.

A runtime implements the abstract ``_``-methods; everything a protocol calls that can be
written once (tracing of collectives, the sync primitives in :mod:`protocols.sync`) is
written here once, so both runtimes behave and trace identically.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Received = bytes | bytearray | memoryview
"""Bytes a member receives from a broadcast or a recv: a runtime may hand over the buffer
the transport filled (a bytearray, a memoryview) instead of copying it into bytes."""
Sendable = bytes | bytearray | memoryview
"""Bytes a member sends: a view of a larger buffer travels without a copy."""

JSON = Any
"""A JSON-serialisable value: what messages, process arguments and trace fields carry."""

# --------------------------------------------------------------------------------------
# Errors: part of the contract, because elastic protocols live in their error paths.
# --------------------------------------------------------------------------------------


class Cancelled(BaseException):
    """Thrown into a task that was cancelled. A BaseException, so ``except Exception``
    in protocol code does not swallow it (as with asyncio.CancelledError)."""


class OperationTimeout(Exception):
    """A deadline given to :meth:`Runtime.wait_for` or :meth:`Runtime.recv` passed."""


class StoreError(Exception):
    """Base of key-value store errors."""


class StoreTimeout(StoreError):
    """A store ``get``/``wait`` did not see its key(s) before the client's timeout."""


class StoreConnectionError(StoreError):
    """The store server is gone (its process died) or could not be reached at connect.

    Like c10d's TCPStore client, a client never reconnects: every later call fails too.
    """


class CollectiveError(Exception):
    """Base of process-group errors."""


class CollectiveFailed(CollectiveError):
    """A peer of the group died (connection closed by peer) or the group was aborted.

    ``peer``: the group rank whose loss failed the call, when the runtime knows it (traced
    as ``coll_fail``'s ``peer``: the failure names the dead peer)."""

    def __init__(self, message: str, peer: int | None = None) -> None:
        super().__init__(message)
        self.peer = peer


class CollectiveTimeout(CollectiveError):
    """A collective did not complete within the group's timeout (a peer hangs or is cut off)."""


class ProcessExited(Exception):
    """A child process ended; ``code`` is its exit status (negative: killed by a signal)."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"process {name} exited with code {code}")
        self.name = name
        self.code = code


# --------------------------------------------------------------------------------------
# Futures and tasks: the one concurrency primitive a runtime must provide.
# --------------------------------------------------------------------------------------


class Future(abc.ABC, Generic[T]):
    """A value that becomes available later, awaitable by exactly the tasks of one process.

    Resolving a future never runs waiters synchronously: they resume at the same time,
    after the current task yields. :mod:`protocols.sync` builds events, queues, locks and
    conditions on this alone.
    """

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether a result or an exception is set."""

    @abc.abstractmethod
    def set_result(self, value: T) -> None:
        """Resolve with a value; an error if already done."""

    @abc.abstractmethod
    def set_exception(self, exc: BaseException) -> None:
        """Resolve with an error, raised in every awaiter."""

    @abc.abstractmethod
    def result(self) -> T:
        """The value (or raise the error); an error if not done."""

    @abc.abstractmethod
    def __await__(self) -> Generator[Any, Any, T]:
        """Suspend the awaiting task until resolved."""


class Task(abc.ABC, Generic[T]):
    """A coroutine running concurrently inside one process; it dies with the process."""

    name: str

    @abc.abstractmethod
    def cancel(self) -> None:
        """Throw :class:`Cancelled` into the task at its current await (or before it starts)."""

    @abc.abstractmethod
    def done(self) -> bool:
        """Whether the task has finished (returned, raised or was cancelled)."""

    @abc.abstractmethod
    def __await__(self) -> Generator[Any, Any, T]:
        """Wait for the task; return its result or raise its error (Cancelled included)."""


# --------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A control message: ``body`` is a JSON object; never pickled on the wire."""

    src: str
    body: Mapping[str, JSON]


# --------------------------------------------------------------------------------------
# Key-value store with c10d TCPStore semantics.
# --------------------------------------------------------------------------------------


class Store(abc.ABC):
    """A client of a key-value store hosted by one process (c10d TCPStore semantics).

    - ``get`` blocks until the key exists, or raises :class:`StoreTimeout` after the
      client's timeout.
    - ``compare_set(key, expected, desired)``: if the key is missing and ``expected`` is
      empty, sets ``desired`` and returns it; if missing and ``expected`` is non-empty,
      returns ``expected`` without writing; if the current value equals ``expected``,
      sets ``desired`` and returns it; otherwise returns the current value.
    - ``add`` treats a missing key as 0 and returns the new value (stored as decimal text).
    - Every call raises :class:`StoreConnectionError` once the server process is dead.
    """

    timeout: float

    @abc.abstractmethod
    async def set(self, key: str, value: bytes) -> None:
        """Write ``value`` under ``key``."""

    @abc.abstractmethod
    async def get(self, key: str) -> bytes:
        """Read ``key``, waiting for it to exist up to the client's timeout."""

    @abc.abstractmethod
    async def add(self, key: str, amount: int) -> int:
        """Atomically add to the integer under ``key``; return the new value."""

    @abc.abstractmethod
    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        """Atomic compare-and-set with c10d's semantics (see the class docstring)."""

    @abc.abstractmethod
    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        """Wait until every key exists; :class:`StoreTimeout` after ``timeout``
        (default: the client's timeout)."""

    @abc.abstractmethod
    async def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists, without waiting."""

    @abc.abstractmethod
    async def delete(self, key: str) -> bool:
        """Delete ``key``; whether it existed."""

    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Read every key in one request (c10d ``multi_get``), waiting for all of them to
        exist up to the client's timeout. This default, for a store without a batched
        request, reads them one at a time."""
        return [await self.get(k) for k in keys]

    def prefixed(self, prefix: str) -> Store:
        """A view of this store whose keys are ``prefix + '/' + key`` (c10d PrefixStore)."""
        return PrefixStore(self, prefix)


class PrefixStore(Store):
    """Keys of the wrapped store under ``prefix/``; shares the client and its timeout."""

    def __init__(self, inner: Store, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix
        self.timeout = inner.timeout

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    async def set(self, key: str, value: bytes) -> None:
        await self.inner.set(self._k(key), value)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(self._k(key))

    async def add(self, key: str, amount: int) -> int:
        return await self.inner.add(self._k(key), amount)

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        return await self.inner.compare_set(self._k(key), expected, desired)

    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        await self.inner.wait([self._k(k) for k in keys], timeout)

    async def check(self, keys: Sequence[str]) -> bool:
        return await self.inner.check([self._k(k) for k in keys])

    async def delete(self, key: str) -> bool:
        return await self.inner.delete(self._k(key))

    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        return await self.inner.multi_get([self._k(k) for k in keys])


# --------------------------------------------------------------------------------------
# Process groups (one per membership epoch).
# --------------------------------------------------------------------------------------


class Group(abc.ABC):
    """A process group of one membership epoch (Gloo semantics).

    A collective completes only when every member has entered the same one (matched by
    the group's sequence number); it raises :class:`CollectiveFailed` when a member died
    (each survivor notices after its own detection latency) and :class:`CollectiveTimeout`
    when a member hangs or is cut off. Payloads are bytes and float lists so the sim needs
    no torch; the real runtime moves them as tensors. What a member receives is a buffer
    (:data:`Received`: the real runtime hands over the memory Gloo filled, a memoryview):
    read it as bytes-like (``bytes(got)`` where ``bytes`` methods are needed).
    """

    name: str
    rank: int
    size: int

    @abc.abstractmethod
    async def _allreduce(self, values: list[float]) -> list[float]:
        """Element-wise sum over members."""

    @abc.abstractmethod
    async def _broadcast(self, data: bytes, root: int) -> Received:
        """Root's ``data`` to everyone; every member passes a buffer of the same length."""

    @abc.abstractmethod
    async def _barrier(self) -> None:
        """Return when every member has entered."""

    @abc.abstractmethod
    async def _send(self, dst: int, data: Sendable) -> None:
        """Point-to-point send to rank ``dst``."""

    @abc.abstractmethod
    async def _recv(self, src: int, nbytes: int) -> Received:
        """Point-to-point receive of exactly ``nbytes`` from rank ``src``."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Fail every pending and future collective of this member with CollectiveFailed."""


def blamed(exc: CollectiveError) -> dict[str, int]:
    """The trace field naming the peer a collective failure blamed (none if unknown)."""
    peer = getattr(exc, "peer", None)
    return {} if peer is None else {"peer": int(peer)}


@dataclass
class StretchResult:
    """What a runtime's fast ``train`` (:meth:`TracedGroup.train`) hands back: the sums of
    the steps it ran (``apply`` them in order), then, if steps remain, either the next
    step's allreduce already entered (``entry``: await its result) or its compute done
    (``slept``), or neither (go on step by step)."""

    sums: list[list[float]] = field(default_factory=list)
    entry: Awaitable[list[float]] | None = None
    slept: bool = False


class TracedGroup:
    """What protocols hold: a :class:`Group` whose collectives are traced identically in
    both runtimes (``coll_enter`` / ``coll_done`` / ``coll_fail``) and numbered."""

    def __init__(self, rt: Runtime, inner: Group) -> None:
        self._rt = rt
        self._inner = inner
        self.name = inner.name
        self.rank = inner.rank
        self.size = inner.size
        self.seq = 0

    async def _traced(self, op: str, nbytes: int, aw: Awaitable[T], entered: bool = False
                      ) -> T:
        seq = self.seq
        self.seq += 1
        if not entered:  # else its coll_enter is in a train_steps summary
            self._rt.record("coll_enter", group=self.name, seq=seq, op=op, nbytes=nbytes)
        try:
            out = await aw
        except CollectiveError as exc:
            self._rt.record("coll_fail", group=self.name, seq=seq, op=op,
                            error=type(exc).__name__, **blamed(exc))
            raise
        self._rt.record("coll_done", group=self.name, seq=seq, op=op)
        return out

    async def allreduce(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over members."""
        vals = list(values)
        return await self._traced("allreduce", 8 * len(vals), self._inner._allreduce(vals))

    async def train(self, count: int, step_time: float, grads: Callable[[int], list[float]],
                    apply: Callable[[int, list[float]], None], first: int, *,
                    trace_step: bool = True, **fields: JSON) -> None:
        """``count`` training steps, each ``sleep(step_time)`` (the compute) then an
        allreduce of ``grads(i)``, then ``apply(i, summed)`` and a ``step`` event
        (``fields`` and ``step=first + i``; none where ``trace_step`` is False: a member
        whose steps another member traces). :class:`CollectiveError` after ``apply`` of the
        steps done. Every member calls it with the same ``count`` and ``step_time``.

        This is the loop below in every runtime, except that the sim at its default
        fidelity (``fast``) runs a lockstep stretch of the members as one event and traces
        it as one ``train_steps`` summary (:mod:`sim.stretch`), with the same times and
        results, splitting it where anything touches the run."""
        fast = getattr(self._inner, "_train", None)
        step_fields = fields if trace_step else None
        if fast is None:
            await self.steps(0, count, step_time, grads, apply, first, step_fields)
            return
        out: StretchResult = await fast(count, step_time, grads, first, step_fields)
        for i, summed in enumerate(out.sums):
            apply(i, summed)
        k = len(out.sums)
        self.seq += k
        slept = False
        if out.entry is not None:  # inside step k's allreduce (its coll_enter is traced)
            summed = await self._traced("allreduce", 8 * len(grads(k)), out.entry, True)
            apply(k, summed)
            if step_fields is not None:
                self._rt.record("step", **step_fields, step=first + k)
            k += 1
        elif out.slept:  # step k's compute is done
            slept = True
        await self.steps(k, count, step_time, grads, apply, first, step_fields, slept)

    async def steps(self, start: int, count: int, step_time: float,
                    grads: Callable[[int], list[float]],
                    apply: Callable[[int, list[float]], None], first: int,
                    fields: Mapping[str, JSON] | None, slept: bool = False) -> None:
        """Steps ``start..count-1`` of :meth:`train` one by one (``slept``: the first
        step's compute is already done; ``fields`` None: no ``step`` events)."""
        for i in range(start, count):
            if not slept:
                await self._rt.sleep(step_time)
            slept = False
            summed = await self.allreduce(grads(i))
            apply(i, summed)
            if fields is not None:
                self._rt.record("step", **fields, step=first + i)

    async def broadcast(self, data: bytes, root: int) -> Received:
        """Root's bytes to all; every member passes a buffer of the same length."""
        return await self._traced("broadcast", len(data), self._inner._broadcast(data, root))

    async def barrier(self) -> None:
        """Return when every member has entered."""
        await self._traced("barrier", 0, self._inner._barrier())

    async def send(self, dst: int, data: Sendable) -> None:
        """Point-to-point send (not numbered: only the two ends take part)."""
        await self._inner._send(dst, data)

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task[T]:
        """Run ``coro`` as a task of this member's process (a send overlapping a recv)."""
        return self._rt.spawn(coro, name)

    async def recv(self, src: int, nbytes: int) -> Received:
        """Point-to-point receive of exactly ``nbytes``."""
        return await self._inner._recv(src, nbytes)

    def abort(self) -> None:
        """Fail this member's pending and future collectives."""
        self._inner.abort()


# --------------------------------------------------------------------------------------
# Child processes.
# --------------------------------------------------------------------------------------

Entry = Callable[["Runtime", Mapping[str, JSON]], Coroutine[Any, Any, int]]
"""A process's main: ``async def main(rt, args) -> exit code``, named as ``"module:function"``."""

SIGNALS = ("TERM", "KILL", "STOP", "CONT", "INT", "HUP", "QUIT", "USR1", "USR2")

HANDLED_SIGNALS = ("TERM", "INT", "HUP", "QUIT", "USR1", "USR2")
"""Signals a process may install a handler for (:meth:`Runtime.on_signal`); unhandled,
each ends the process (its default action)."""


class Proc(abc.ABC):
    """A child process started by :meth:`Runtime.start_process`."""

    name: str

    @abc.abstractmethod
    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    @abc.abstractmethod
    async def wait(self) -> int:
        """Wait for the exit code (negative: killed by that signal number)."""

    @abc.abstractmethod
    def signal(self, sig: str) -> None:
        """Deliver one of :data:`SIGNALS`; nothing if it has exited."""


SIGNAL_NUMBERS = {"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12,
                  "TERM": 15, "CONT": 18, "STOP": 19}
"""Linux numbering, so exit codes read the same in both runtimes (-9 = SIGKILL)."""


# --------------------------------------------------------------------------------------
# The runtime.
# --------------------------------------------------------------------------------------


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
    """Who this process is: its host, its name (``host/name``), its environment and its
    process id (real pid; in the sim, handed out deterministically in start order)."""

    host: str
    name: str
    env: dict[str, str] = field(default_factory=dict)
    pid: int = 0


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
    def send(self, dst: str, body: Mapping[str, JSON]) -> None:
        """Send a JSON object to process ``dst`` (``host/name``); fire and forget.

        A message to a dead process or across a cut link is lost; to a paused host it is
        delivered when the host resumes."""

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

    async def new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float
    ) -> TracedGroup:
        """Join the process group ``name`` (one per epoch) through ``store``.

        Returns when all ``size`` members have joined; :class:`CollectiveTimeout` if they do
        not within ``timeout`` (which also bounds every collective of the group)."""
        self.record("group_init", group=name, rank=rank, size=size)
        try:
            inner = await self._new_group(store, name, rank, size, timeout)
        except CollectiveError as exc:
            self.record("group_failed", group=name, rank=rank, size=size,
                        error=type(exc).__name__, **blamed(exc))
            raise
        self.record("group_ready", group=name, rank=rank, size=size)
        return TracedGroup(self, inner)

    @abc.abstractmethod
    async def _new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float
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
    def on_signal(self, sig: str, handler: Callable[[], None] | None) -> None:
        """Install (or, with None, remove) a handler for one of :data:`HANDLED_SIGNALS`;
        by default they kill."""

    # -- discovery ---------------------------------------------------------------------

    @abc.abstractmethod
    def discovery_overlay(self) -> DiscoveryOverlay:
        """The discovery-source faults in effect now, for a protocol's discovery source to
        apply to each call. Calling it declares that this process runs a discovery source:
        a run where no process ever does reports its discovery faults as not fired."""

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


def exit_status(result: object, exc: BaseException | None = None) -> tuple[int, str]:
    """The exit status of a process whose entry returned ``result`` (or raised ``exc``), and
    why: what ``waitpid`` reports for a real process, so both runtimes agree.

    ``None`` is 0; an int is taken modulo 256 (256 exits 0, -1 exits 255); anything else
    (``True``, ``False``, a string) is 1, as is an exception. ``SystemExit(code)`` follows
    the same rules for its code, as Python's interpreter does."""
    if isinstance(exc, SystemExit):
        code, why = exit_status(exc.code)
        return code, "SystemExit" if why == "returned" else why.replace("returned", "SystemExit", 1)
    if exc is not None:
        return 1, f"{type(exc).__name__}: {exc}"
    if result is None:
        return 0, "returned"
    if isinstance(result, bool) or not isinstance(result, int):
        return 1, f"returned {result!r}, not an exit code"
    if not 0 <= result <= 255:
        return result & 0xFF, f"returned {result}, truncated to {result & 0xFF}"
    return result, "returned"


def resolve_entry(entry: str) -> Entry:
    """Import ``"module:function"``. Runtimes use it to start processes by name."""
    import importlib

    mod_name, _, fn_name = entry.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"entry {entry!r}: expected 'module:function'")
    fn = getattr(importlib.import_module(mod_name), fn_name)
    return fn  # type: ignore[no-any-return]
