"""Events, queues, locks and conditions for protocol code, written once over
:meth:`Runtime.future` so that both runtimes wake waiters in the same (FIFO) order.

Horovod's driver bugs are lock-hold and lock-order bugs, so locks keep their owner and
the time they were taken: a trace can show who held what, and for how long.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, TypeVar

from elastic_sim.protocols.api import Future, OperationTimeout, Runtime

T = TypeVar("T")


class Event:
    """A flag that tasks wait on until some task sets it."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._set = False
        self._waiters: deque[Future[None]] = deque()

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        self._set = True
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def clear(self) -> None:
        """Clear the flag; later waiters block again."""
        self._set = False

    async def wait(self, timeout: float | None = None) -> None:
        """Return once the flag is set; :class:`OperationTimeout` after ``timeout``."""
        if self._set:
            return
        fut: Future[None] = self._rt.future()
        self._waiters.append(fut)
        await _await_with_timeout(self._rt, fut, timeout, self._waiters)


class Queue(Generic[T]):
    """An unbounded FIFO queue between tasks of one process."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._items: deque[T] = deque()
        self._getters: deque[Future[T]] = deque()

    def qsize(self) -> int:
        """Items waiting."""
        return len(self._items)

    def put_nowait(self, item: T) -> None:
        """Append; hand it straight to the oldest waiting getter if there is one."""
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(item)
                return
        self._items.append(item)

    def get_nowait(self) -> T:
        """Pop the oldest item; IndexError when empty."""
        return self._items.popleft()

    def clear(self) -> None:
        """Drop every waiting item."""
        self._items.clear()

    async def get(self, timeout: float | None = None) -> T:
        """Pop the oldest item, waiting for one; :class:`OperationTimeout` after ``timeout``."""
        if self._items:
            return self._items.popleft()
        fut: Future[T] = self._rt.future()
        self._getters.append(fut)
        return await _await_with_timeout(self._rt, fut, timeout, self._getters)


class Lock:
    """A mutual-exclusion lock that records its owner and since when it is held."""

    def __init__(self, rt: Runtime, name: str = "lock") -> None:
        self._rt = rt
        self.name = name
        self.owner: str | None = None
        self.held_since: float | None = None
        self._waiters: deque[tuple[Future[None], str]] = deque()

    def locked(self) -> bool:
        """Whether some task holds it."""
        return self.owner is not None

    async def acquire(self, owner: str = "") -> None:
        """Take the lock, waiting in FIFO order."""
        if self.owner is None and not self._waiters:
            self._take(owner)
            return
        fut: Future[None] = self._rt.future()
        self._waiters.append((fut, owner))
        await fut  # ownership was handed over by release()

    def _take(self, owner: str) -> None:
        self.owner = owner or "?"
        self.held_since = self._rt.monotonic()

    def release(self) -> None:
        """Release; hand ownership to the oldest waiter."""
        if self.owner is None:
            raise RuntimeError(f"release of unlocked {self.name}")
        self.owner = None
        self.held_since = None
        while self._waiters:
            fut, owner = self._waiters.popleft()
            if not fut.done():
                self._take(owner)
                fut.set_result(None)
                return

    async def __aenter__(self) -> Lock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.release()


class Condition:
    """A condition variable over a :class:`Lock` (wait releases it, re-takes it on wake)."""

    def __init__(self, rt: Runtime, lock: Lock | None = None) -> None:
        self._rt = rt
        self.lock = lock or Lock(rt, "condition")
        self._waiters: deque[Future[None]] = deque()

    async def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait for a notify (or the timeout), re-acquire.
        Returns False if it timed out."""
        fut: Future[None] = self._rt.future()
        self._waiters.append(fut)
        owner = self.lock.owner or ""
        self.lock.release()
        woke = True
        try:
            await _await_with_timeout(self._rt, fut, timeout, self._waiters)
        except OperationTimeout:
            woke = False
        finally:
            await self.lock.acquire(owner)
        return woke

    def notify(self, n: int = 1) -> None:
        """Wake up to ``n`` waiters."""
        while n > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1

    def notify_all(self) -> None:
        """Wake every waiter."""
        self.notify(len(self._waiters))

    async def __aenter__(self) -> Condition:
        await self.lock.acquire()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.lock.release()


async def _await_with_timeout(
    rt: Runtime, fut: Future[T], timeout: float | None, waiters: deque[Any]
) -> T:
    """Await ``fut``; on timeout fail it (so a later resolve is a no-op), drop it from
    ``waiters`` (else timed-out waiters pile up) and raise."""
    if timeout is None:
        return await fut

    def _expire() -> None:
        if not fut.done():
            fut.set_exception(OperationTimeout(f"no result within {timeout}s"))

    timer = rt.after(timeout, _expire)
    try:
        return await fut
    except OperationTimeout:
        try:
            waiters.remove(fut)
        except ValueError:
            pass
        raise
    finally:
        timer.cancel()
