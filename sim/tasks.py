"""The task driver: protocol coroutines stepped by kernel callbacks, and what they await.

A :class:`SimTask` holds a coroutine and is stepped (``send``/``throw``) by plain callbacks
scheduled on the kernel. What a task awaits is a small *waitable* whose ``__await__`` yields
itself to the driver (or returns at once when already done); the driver then calls its
``_wait(task, gen)`` so that it can resume the task later with ``task._resume(gen)``.
``gen`` counts the task's suspensions: a wake-up meant for an older suspension (a timer
that fires after the task was cancelled, say) is ignored.

A task belongs to an :class:`Owner` (its process). A wake-up that becomes due while the
owner is paused is deferred by the owner and replayed, in order, when it resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from elastic_sim.protocols.api import Cancelled, Future, Task, Timer
from elastic_sim.sim.kernel import Kernel

T = TypeVar("T")


class InvalidStateError(RuntimeError):
    """A future was resolved twice, or read before it was resolved."""


class Owner(Protocol):
    """What a task needs from its process."""

    alive: bool
    runnable: bool
    wedged: dict[str, list[tuple[SimTask[Any], int, Any, BaseException | None]]]
    """Activities (task names) that are stuck, each with the wake-ups held for it."""
    ticks: list[Any]
    """Its polled waits that skip ticks (:mod:`elastic_sim.sim.ticks`): re-planned after each step
    of any of its tasks."""

    def defer(self, fn: Callable[..., object], *args: Any) -> None:
        """Hold a continuation until the owner runs again."""

    def task_done(self, task: SimTask[Any]) -> None:
        """A task of this owner finished."""


Waiter = tuple["SimTask[Any]", int]


def wake_all(waiters: list[Waiter]) -> None:
    """Resume each (task, gen), in order."""
    for task, gen in waiters:
        task._resume(gen)


class Waitable(Generic[T]):
    """What tasks await until it is done (a task's end, a future's resolution): its result
    or error, and the tasks waiting for it, which resume at the same time, after the
    current step, in FIFO order (one scheduled callback for all of them)."""

    def __init__(self, kernel: Kernel) -> None:
        self._k = kernel
        self._done = False
        self._result: Any = None
        self._exc: BaseException | None = None
        self._waiters: list[Waiter] = []

    def done(self) -> bool:
        """Whether it is done: a result or an error is set (a task: it returned, raised or
        was cancelled)."""
        return self._done

    def _settle(self, result: Any, exc: BaseException | None) -> None:
        """It is done, with ``result`` or ``exc``: schedule its awaiters."""
        self._done = True
        self._result = result
        self._exc = exc
        if self._waiters:
            ws, self._waiters = self._waiters, []
            self._k.soon(wake_all, ws)

    def _wait(self, task: SimTask[Any], gen: int) -> None:
        if self._done:
            self._k.soon(task._resume, gen)
        else:
            self._waiters.append((task, gen))

    def __await__(self) -> Generator[Any, Any, T]:
        """Suspend the awaiting task until done (not at all if it already is); return the
        result or raise the error (Cancelled included)."""
        if not self._done:
            yield self
        if self._exc is None:
            return self._result  # type: ignore[no-any-return]
        exc = self._exc
        del self  # the traceback keeps this frame: let it hold neither this nor exc
        try:
            raise exc
        finally:
            del exc


class SimTask(Waitable[T], Task[T]):
    """A coroutine of one process, stepped by the kernel."""

    def __init__(
        self, kernel: Kernel, owner: Owner, coro: Coroutine[Any, Any, T], name: str, tid: int
    ) -> None:
        super().__init__(kernel)
        self.name = name
        self.tid = tid
        self.tie_salt: int | None = None
        """Its lane's salt, in a run with a tie seed (drawn when it first schedules)."""
        self.owner = owner
        self._coro = coro
        self._gen = 0
        self._cancel = 0  # 0: none, 1: requested while running, 2: throw scheduled

    def start(self) -> None:
        """Schedule the first step (at the current time, never re-entrantly)."""
        self._k.soon(self._resume, 0)

    # -- driving -----------------------------------------------------------------------

    def _resume(self, gen: int, value: Any = None, exc: BaseException | None = None) -> None:
        if gen != self._gen or self._done:
            return
        owner = self.owner
        if not owner.alive:
            return
        if not owner.runnable:
            owner.defer(self._resume, gen, value, exc)
            return
        if owner.wedged and self.name in owner.wedged:  # its activity is stuck: hold it
            owner.wedged[self.name].append((self, gen, value, exc))
            return
        self._step(value, exc)
        if owner.ticks:
            _replan(owner.ticks, self)

    def _step(self, value: Any, exc: BaseException | None) -> None:
        k = self._k
        k.current = self
        try:
            if exc is None:
                w = self._coro.send(value)
            else:
                w = self._coro.throw(exc)
        except StopIteration as stop:
            k.current = None
            self._finish(stop.value, None)
            return
        except KeyboardInterrupt:
            k.current = None
            raise
        except BaseException as err:
            k.current = None
            self._finish(None, _untangle(err))
            return
        k.current = None
        self._gen += 1
        gen = self._gen
        wait = getattr(w, "_wait", None)
        if wait is not None:
            wait(self, gen)
        elif w is None:  # a bare yield: let others run, then continue
            k.soon(self._resume, gen)
        else:
            k.soon(self._resume, gen, None, TypeError(f"a sim task cannot await {w!r}"))
        if self._cancel == 1:
            self._send_cancel()

    def _finish(self, result: Any, exc: BaseException | None) -> None:
        self._settle(result, exc)
        self.owner.task_done(self)

    # -- cancellation ------------------------------------------------------------------

    def cancel(self) -> None:
        """Throw :class:`Cancelled` into the task at its current await (or before it starts).

        Delivered by a zero-delay scheduled step, never re-entrantly."""
        if self._done or self._cancel:
            return
        if self._k.current is self:
            self._cancel = 1  # thrown at the task's next await
            return
        self._send_cancel()

    def _send_cancel(self) -> None:
        self._cancel = 2
        self._gen += 1
        self._k.soon(self._throw_cancel, self._gen)

    def _throw_cancel(self, gen: int) -> None:
        if gen != self._gen or self._done or not self.owner.alive:
            return
        if not self.owner.runnable:
            self.owner.defer(self._throw_cancel, gen)
            return
        self._cancel = 0
        self._step(None, Cancelled())
        if self.owner.ticks:
            _replan(self.owner.ticks, self)

    def cancel_now(self) -> None:
        """Throw Cancelled synchronously (its process is exiting); if the task tries to
        await again it is closed."""
        if self._done:
            return
        k = self._k
        k.current = self
        try:
            self._coro.throw(Cancelled())
        except StopIteration as stop:
            self._result = stop.value
        except KeyboardInterrupt:
            raise
        except BaseException as err:
            self._exc = _untangle(err)
        else:
            self._exc = Cancelled()
            _close(self._coro)
        finally:
            k.current = None
        self._done = True
        self._waiters.clear()
        self.owner.task_done(self)

    def kill(self) -> None:
        """Drop the task at once (its process was killed): close the coroutine."""
        if self._done:
            return
        self._done = True
        self._exc = Cancelled("process killed")
        self._waiters.clear()
        _close(self._coro)


def _replan(ticks: list[Any], stepped: SimTask[Any]) -> None:
    """A task stepped: the other polled waits of its process look again
    (:mod:`elastic_sim.sim.ticks`)."""
    for t in list(ticks):
        if t.task is not stepped:
            t.replan()


def _untangle(err: BaseException) -> BaseException:
    """Drop the driver's own frame from ``err``'s traceback: it refers to the task, and a
    task -> error -> traceback -> frame -> task cycle would wait for the (disabled) gc."""
    tb = err.__traceback__
    if tb is not None and tb.tb_frame.f_code is SimTask._step.__code__:
        err.__traceback__ = tb.tb_next
    return err


def _raise(exc: BaseException) -> NoReturn:
    """Raise ``exc`` from a frame that keeps no reference to it or to its holder, so that
    the traceback forms no reference cycle (the run has gc disabled)."""
    try:
        raise exc
    finally:
        del exc


def _raise_once(p: Pending[Any]) -> NoReturn:
    """Raise a pending's error, letting go of it first (it has one awaiter)."""
    exc, p.exc = p.exc, None
    try:
        raise exc  # type: ignore[misc]
    finally:
        del exc


def _close(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        coro.close()
    except KeyboardInterrupt:
        raise
    except BaseException:  # a finally block that awaited or raised while dying
        pass


class SimFuture(Waitable[T], Future[T]):
    """A future: resolving it wakes its awaiters at the same time, after the current step,
    in FIFO order (one scheduled callback for all of them)."""

    def set_result(self, value: T) -> None:
        """Resolve with a value; InvalidStateError if already done."""
        self._resolve(value, None)

    def set_exception(self, exc: BaseException) -> None:
        """Resolve with an error, raised in every awaiter."""
        self._resolve(None, exc)

    def _resolve(self, value: Any, exc: BaseException | None) -> None:
        if self._done:
            raise InvalidStateError("future already done")
        self._settle(value, exc)

    def result(self) -> T:
        """The value (or raise the error); InvalidStateError if not done."""
        if not self._done:
            raise InvalidStateError("future not done")
        if self._exc is not None:
            _raise(self._exc)
        return self._result  # type: ignore[no-any-return]


class Pending(Generic[T]):
    """A one-shot result awaited by exactly one task: cheaper than a future, and it can
    resume its task directly from a kernel callback (no extra scheduled event)."""

    __slots__ = ("_k", "done", "exc", "gen", "task", "value")

    def __init__(self, kernel: Kernel) -> None:
        self._k = kernel
        self.done = False
        self.value: Any = None
        self.exc: BaseException | None = None
        self.task: SimTask[Any] | None = None
        self.gen = 0

    def stale(self) -> bool:
        """Whether the awaiting task has moved on (cancelled) or finished."""
        t = self.task
        return t is not None and (t._gen != self.gen or t._done)

    def settle(self, value: Any = None, exc: BaseException | None = None) -> Waiter | None:
        """Set the outcome without waking; return the (task, gen) to wake, if any."""
        if self.done:
            return None
        self.done = True
        self.value = value
        self.exc = exc
        if self.task is None:
            return None
        return (self.task, self.gen)

    def resolve(
        self, value: Any = None, exc: BaseException | None = None, direct: bool = False
    ) -> None:
        """Set the outcome and wake the task: ``direct`` resumes it right here (only from a
        top-level kernel callback), else at the current time after the current step."""
        w = self.settle(value, exc)
        if w is None:
            return
        if direct:
            w[0]._resume(w[1])
        else:
            self._k.soon(w[0]._resume, w[1])

    def _wait(self, task: SimTask[Any], gen: int) -> None:
        self.task = task
        self.gen = gen
        if self.done:
            self._k.soon(task._resume, gen)

    def __await__(self) -> Generator[Any, Any, T]:
        """Suspend the awaiting task until settled; return the value or raise the error."""
        if not self.done:
            yield self
        if self.exc is not None:
            _raise_once(self)
        return self.value  # type: ignore[no-any-return]


class Sleep:
    """Awaitable: resume the task after ``delay`` virtual seconds (one timer event)."""

    __slots__ = ("_k", "delay")

    def __init__(self, kernel: Kernel, delay: float) -> None:
        self._k = kernel
        self.delay = delay if delay > 0.0 else 0.0

    def _wait(self, task: SimTask[Any], gen: int) -> None:
        self._k.call_later(self.delay, task._resume, gen)

    def __await__(self) -> Generator[Any, Any, None]:
        """Suspend the awaiting task for ``delay`` seconds."""
        yield self


class Alarm(Timer):
    """:meth:`Runtime.after` in the sim: one kernel callback at the instant a task sleeping
    the same time would wake, where that task would have called; no task (its start, its
    wake-up, its cancellation: three events a timeout need not cost). Like that task it
    does nothing once its process died, and it is held while the process is stopped."""

    __slots__ = ("_call", "_fn", "_over", "_owner")

    def __init__(self, kernel: Kernel, owner: Owner, delay: float,
                 fn: Callable[[], None]) -> None:
        self._owner = owner
        self._fn = fn
        self._over = False
        self._call = kernel.call_later(delay, self._ring)

    def _ring(self) -> None:
        if self._over or not self._owner.alive:
            return
        if not self._owner.runnable:
            self._owner.defer(self._ring)
            return
        self._over = True
        self._fn()

    def cancel(self) -> None:
        """Stop it from running (nothing, once it ran)."""
        self._over = True
        self._call.cancel()
