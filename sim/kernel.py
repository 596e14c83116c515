"""The kernel: virtual time, callbacks scheduled on the simpy event queue, the trace.

No simpy process per task or per message: everything that happens is a :class:`Call`, one
heap entry whose callback runs at its time. Ties in time run in scheduling order (simpy's
event ids), which makes a run deterministic. :mod:`sim.tasks` drives coroutines on it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, URGENT, Event

from protocols.trace import TraceEvent

if TYPE_CHECKING:
    from sim.tasks import SimTask


def _fire(ev: Event) -> None:
    call: Call = ev  # type: ignore[assignment]
    if not call.cancelled:
        call.fn(*call.args)


_FIRE: list[Callable[[Any], None]] = [_fire]  # shared: simpy only iterates an event's callbacks


COLLECT_EVERY = 50_000
"""With the gc disabled (as :func:`sim.run` does), collect young reference cycles after
every this many scheduled callbacks: at points fixed by the run itself, so finalizers that
run then (a protocol generator's ``finally``) run at the same place every time."""


def _collect() -> None:
    if not gc.isenabled():
        gc.collect(1)


class Call(Event):
    """One callback scheduled on the simpy queue (no simpy process, no generator)."""

    def __init__(self, env: simpy.Environment, fn: Callable[..., object], args: tuple[Any, ...]):
        self.env = env
        self.callbacks = _FIRE
        self._value = None
        self._ok = True
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        """Make the callback a no-op (the heap entry stays until its time, holding nothing)."""
        self.cancelled = True
        self.args = ()


class Kernel:
    """Virtual time and the event queue (a simpy Environment), and the trace output."""

    def __init__(self, emit: Callable[[TraceEvent], None]) -> None:
        self.env = simpy.Environment()
        self.current: SimTask[Any] | None = None
        """The task being stepped right now (None between steps)."""
        self._emit = emit
        self.events = 0
        """Trace events emitted so far."""
        self.closed = False
        """Set when the run has ended: nothing more is traced."""
        self._calls = 0

    @property
    def now(self) -> float:
        """Virtual time in seconds."""
        return self.env.now

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> Call:
        """Run ``fn(*args)`` ``delay`` seconds from now (after everything already due then)."""
        call = Call(self.env, fn, args)
        self.env.schedule(call, NORMAL, delay)
        self._calls += 1
        if self._calls % COLLECT_EVERY == 0:
            self.env.schedule(Call(self.env, _collect, ()), NORMAL, 0.0)
        return call

    def call_at(self, t: float, fn: Callable[..., object], *args: Any) -> Call:
        """Run ``fn(*args)`` at virtual time ``t`` (now, if ``t`` has passed)."""
        delay = t - self.env.now
        return self.call_later(delay if delay > 0.0 else 0.0, fn, *args)

    def soon(self, fn: Callable[..., object], *args: Any) -> Call:
        """Run ``fn(*args)`` at the current time, after what is already due now."""
        return self.call_later(0.0, fn, *args)

    def stop_after(self, delay: float) -> None:
        """Stop :meth:`run` ``delay`` seconds from now, before anything else due then."""
        ev = Event(self.env)
        ev._ok = True
        ev._value = None
        ev.callbacks.append(StopSimulation.callback)
        self.env.schedule(ev, URGENT, delay)

    def run(self) -> None:
        """Process events until a stop or until nothing is scheduled."""
        self.env.run()

    def trace(self, host: str, proc: str, kind: str, data: Mapping[str, Any]) -> None:
        """Emit one trace event stamped with the current virtual time."""
        if self.closed:
            return
        self.events += 1
        self._emit(TraceEvent(t=self.env.now, host=host, proc=proc, kind=kind, data=data))
