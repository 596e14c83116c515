"""Futures and tasks: the one concurrency primitive a runtime must provide (a task runs a
coroutine inside one process; a future is what it awaits)."""

from __future__ import annotations

import abc
from collections.abc import Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Future(abc.ABC, Generic[T]):
    """A value that becomes available later, awaitable by exactly the tasks of one process.

    Resolving a future never runs waiters synchronously: they resume at the same time,
    after the current task yields. :mod:`elastic_sim.protocols.sync` builds events, queues, locks
    and conditions on this alone.
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


class Timer(abc.ABC):
    """A callback due later in one process (:meth:`Runtime.after`)."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop it from running (nothing, once it ran)."""


class TaskTimer(Timer):
    """:meth:`Runtime.after` as a task that sleeps, then calls (any runtime can)."""

    def __init__(self, task: Task[None]) -> None:
        self._task = task

    def cancel(self) -> None:
        """Cancel the sleeping task (nothing, once it finished)."""
        if not self._task.done():
            self._task.cancel()
