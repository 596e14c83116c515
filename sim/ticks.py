"""Polled waits at the fast fidelity: :meth:`elastic_sim.protocols.api.Runtime.poll` without a
kernel event per idle tick.

A polling loop's ticks lie on a *grid*: each comes ``interval * slowdown + wake_latency``
after the last (a sleep's duration, the slowdown read at the earlier tick), as the chained
sleeps of the fine run would put them; the grid is computed here by the same float
additions, so every tick falls on the same instant. At a tick the loop's ``idle()`` is
asked, as the fine run's loop asks it; the task wakes at the first tick where it is False
or where the task cannot run (paused, stopped, its activity wedged: the wake-up is then
held as a sleep's would be).

Between two ticks where ``idle()`` is asked nothing is scheduled: what can turn it False
*re-plans* the wait, so that it is asked at the next grid tick:

* time: ``until()`` (the protocol's hint, on the process's monotonic clock) says when it
  turns False if nothing else changes; the wait is asked at the first grid tick at or past
  it, and never asked at ticks before it (where the fine run's loop finds it True);
* a step of any other task of the same process (it may take a lock, sync a cache);
* anything acting on processes from outside (:meth:`elastic_sim.sim.host.Cluster.touch`: a signal, a
  kill, a pause or resume, every fault's start and heal: a slowdown or clock change) and
  any process's exit (a child's exit code).

Same-time order: the task's tick at ``t_j`` is scheduled where the fine run schedules it,
at the instant of the tick before (a *probe* event at ``t_(j-1)`` schedules it), so it
runs among the other callbacks due at ``t_j`` in the fine run's order. Two cases are
approximate, both needing a callback on the exact float instant of a grid tick: a re-plan
between ``t_(j-1)`` and ``t_j`` schedules the tick at ``t_j`` then, so a callback due at
``t_j`` and scheduled in between runs before it (after it in the fine run); and a change
at exactly a skipped tick's instant counts as coming after that tick (right for what was
caused within the last interval; a fault scheduled for that very float instant comes
before it in the fine run). Every shipped scenario's fast trace is byte-identical, in
order, to the one the tick-per-interval implementation gave.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from elastic_sim.sim.kernel import Call, Kernel

if TYPE_CHECKING:
    from elastic_sim.sim.host import SimProcess
    from elastic_sim.sim.tasks import SimTask

MAX_SKIP = 100_000
"""Grid ticks looked ahead at most in one plan (a tick is then asked, and plans again)."""


class TickBook:
    """The run's waits that skip ticks, to re-plan on what any process may observe."""

    def __init__(self) -> None:
        self.active: dict[Ticks, None] = {}
        """In the order they started waiting (an insertion-ordered set)."""
        self.ticks = 0
        """Grid ticks at which an ``idle()`` was asked (kernel events of the waits)."""
        self.probes = 0
        """Probe events (a tick scheduled from the tick before it)."""

    def poke_all(self) -> None:
        """Something any process may observe changes now (or is about to): each wait is
        asked again at its next grid tick."""
        if self.active:
            for t in list(self.active):
                t.replan(look=False)


class Ticks:
    """Awaitable: a polled wait (see the module docstring)."""

    __slots__ = ("_at", "_call", "_k", "_next", "_t", "book", "gen", "idle", "interval",
                 "proc", "task", "until", "wake_latency")

    def __init__(self, kernel: Kernel, book: TickBook, proc: SimProcess, interval: float,
                 wake_latency: float, idle: Callable[[], bool],
                 until: Callable[[], float]) -> None:
        self._k = kernel
        self.book = book
        self.proc = proc
        self.interval = interval
        self.wake_latency = wake_latency
        self.idle = idle
        self.until = until
        self.task: SimTask[Any] | None = None
        self.gen = 0
        self._t = 0.0
        """The last grid tick passed (asked, or skipped as surely idle)."""
        self._next = 0.0
        """The grid tick after it (fixed: its delay used the slowdown at ``_t``)."""
        self._call: Call | None = None
        self._at = math.inf
        """The grid tick at which ``idle()`` is asked next (inf: none planned)."""

    def _delay(self) -> float:
        slowdown: float = self.proc.host.slowdown
        return self.interval * slowdown + self.wake_latency

    # -- the task's side ---------------------------------------------------------------

    def _wait(self, task: SimTask[Any], gen: int) -> None:
        self.task = task
        self.gen = gen
        self.proc.ticks.append(self)
        self.book.active[self] = None
        d = self._delay()
        self._t = self._k.now
        self._next = self._t + d
        if self.idle():  # as it stands now, until a change re-plans (or until())
            self._plan()
        else:
            self._at = self._next
            self._call = self._k.call_later(d, self._tick)

    def __await__(self) -> Generator[Any, Any, None]:
        """Suspend the awaiting task until a tick finds work."""
        yield self

    def _stale(self) -> bool:
        task = self.task
        return task is None or self.gen != task._gen or task._done

    def _leave(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
        self._at = math.inf
        ticks = self.proc.ticks
        if self in ticks:
            ticks.remove(self)
        self.book.active.pop(self, None)

    # -- kernel events -----------------------------------------------------------------

    def _tick(self) -> None:
        """A grid tick where ``idle()`` may be False: ask it, as the fine run's loop does."""
        self._call = None
        if self._stale():
            self._leave()
            return
        task = self.task
        assert task is not None
        self.book.ticks += 1
        now = self._k.now
        self._t = now
        self._next = now + self._delay()
        owner = task.owner
        if owner.alive and owner.runnable and not (owner.wedged and task.name in owner.wedged):
            if self.idle():
                self._plan()
                return
        self._leave()
        task._resume(self.gen)

    def _probe(self, at: float) -> None:
        """The grid tick before ``at``: schedule the tick at ``at`` from here, as the fine
        run's tick here schedules its successor."""
        self._call = None
        if self._stale():
            self._leave()
            return
        self.book.probes += 1
        self._t = self._k.now
        self._next = at
        self._call = self._k.call_exactly(at, self._tick)

    # -- planning ----------------------------------------------------------------------

    def _plan(self) -> None:
        """``idle()`` is True now (the grid stands at ``_t`` <= now < ``_next``): ask it
        next at the first grid tick whose monotonic reading reaches ``until()`` (at none
        if inf); keep what is scheduled if it is that already."""
        horizon = self.until()
        if horizon == math.inf:
            self._arm(math.inf, math.inf)
            return
        monotonic, since = self.proc.host.clock.monotonic, self.proc.start_time
        prev, at = self._t, self._next
        d = self._delay()
        n = 0
        while monotonic(at, since) < horizon and n < MAX_SKIP:
            prev, at = at, at + d
            n += 1
        self._arm(at, self._t if prev == self._t else prev)

    def _arm(self, at: float, prev: float) -> None:
        """Ask ``idle()`` at the grid tick ``at``: a tick there scheduled now (``prev`` is
        the grid tick passed last) or from a probe at the grid tick ``prev`` before it."""
        if at == self._at and self._call is not None:
            return
        if self._call is not None:
            self._call.cancel()
            self._call = None
        self._at = at
        if at == math.inf:
            return
        if prev == self._t:
            self._call = self._k.call_exactly(at, self._tick)
        else:
            self._call = self._k.call_exactly(prev, self._probe, at)

    def replan(self, look: bool = True) -> None:
        """What ``idle()`` reads may have changed now: with ``look``, ask it now and plan
        from there; without (the change is still to come), ask it at the next grid tick."""
        if self._stale():
            self._leave()
            return
        now = self._k.now
        if self._at <= now:
            return  # its tick is due now, after what runs now
        while self._next <= now:
            self._t = self._next
            self._next = self._t + self._delay()
        if self._at <= self._next:
            return  # asked at that tick already
        if look and self.idle():
            self._plan()
        else:
            self._arm(self._next, self._t)
