"""asyncio behind the contract's :class:`~elastic_sim.protocols.api.Future` and
:class:`~elastic_sim.protocols.api.Task`, with :class:`~elastic_sim.protocols.api.Cancelled` at the
boundary.

Two asyncio habits differ from the contract and are undone here: cancelling a task that
awaits a future (or another task) cancels that future too, and a cancelled await raises
``asyncio.CancelledError``. Here an awaiter waits on a private waiter instead, so only the
awaiter is cancelled, and every await the runtime hands out raises ``Cancelled``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, ParamSpec, TypeVar

from elastic_sim.protocols import api

T = TypeVar("T")
P = ParamSpec("P")


def boundary(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a runtime coroutine so that cancelling it raises ``Cancelled``."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except asyncio.CancelledError:
            raise api.Cancelled() from None

    return wrapper


def wait_unlinked(fut: asyncio.Future[T]) -> Generator[Any, Any, T]:
    """Await ``fut`` without tying its fate to the awaiter's: cancelling the awaiter
    leaves ``fut`` alone. Cancellation surfaces as ``Cancelled``."""
    if not fut.done():
        waiter: asyncio.Future[None] = fut.get_loop().create_future()

        def _wake(_: asyncio.Future[T]) -> None:
            if not waiter.done():
                waiter.set_result(None)

        fut.add_done_callback(_wake)
        try:
            yield from waiter.__await__()
        except asyncio.CancelledError:
            fut.remove_done_callback(_wake)
            raise api.Cancelled() from None
    try:
        return fut.result()
    except asyncio.CancelledError:  # a task cancelled before it ever ran
        raise api.Cancelled() from None


class AioFuture(api.Future[T]):
    """An asyncio future of one process's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._fut: asyncio.Future[T] = loop.create_future()

    def done(self) -> bool:
        return self._fut.done()

    def set_result(self, value: T) -> None:
        self._fut.set_result(value)

    def set_exception(self, exc: BaseException) -> None:
        self._fut.set_exception(exc)

    def result(self) -> T:
        return self._fut.result()

    def __await__(self) -> Generator[Any, Any, T]:
        return wait_unlinked(self._fut)


class AioTask(api.Task[T]):
    """An asyncio task running protocol code."""

    def __init__(self, task: asyncio.Task[T], name: str) -> None:
        self._task = task
        self.name = name

    def cancel(self) -> None:
        self._task.cancel()

    def done(self) -> bool:
        return self._task.done()

    def __await__(self) -> Generator[Any, Any, T]:
        return wait_unlinked(self._task)


def spawn(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], name: str) -> AioTask[T]:
    """Start ``coro`` as a task of ``loop``, kept alive until it ends."""
    task = loop.create_task(coro, name=name or None)
    _LIVE.add(task)
    task.add_done_callback(_forget)
    return AioTask(task, name)


_LIVE: set[asyncio.Task[Any]] = set()
"""asyncio keeps only weak references to tasks: hold them while they run."""


def _forget(task: asyncio.Task[Any]) -> None:
    _LIVE.discard(task)
