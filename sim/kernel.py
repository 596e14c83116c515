"""The kernel: virtual time, callbacks scheduled on the simpy event queue, the trace.

No simpy process per task or per message: everything that happens is a :class:`Call`, one
heap entry whose callback runs at its time. Ties in time run in scheduling order (simpy's
event ids), which makes a run deterministic. :mod:`elastic_sim.sim.tasks` drives coroutines on it.

With a *tie seed*, callbacks due at the same time from different *lanes* run in a seeded
pseudo-random order instead, and callbacks of one lane keep their scheduling order. A lane
is named by the scheduler where order is part of the semantics (a message channel, a store
connection: FIFO); otherwise it is the task being stepped (its continuations stay in
program order), else the lane of the callback running now (what a callback causes stays
in its cause's lane). Every callback still runs after the one that scheduled it, so a
future's waiters resume after the resolver yields. Same (run, seed, tie seed): same order.
"""

from __future__ import annotations

import gc
import heapq
import random
import signal
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, URGENT, Event

from elastic_sim.trace import TraceEvent

if TYPE_CHECKING:
    from elastic_sim.sim.tasks import SimTask


def _fire(ev: Event) -> None:
    call: Call = ev  # type: ignore[assignment]
    if not call.cancelled:
        call.fn(*call.args)


_FIRE: list[Callable[[Any], None]] = [_fire]  # shared: simpy only iterates an event's callbacks


COLLECT_EVERY = 50_000
"""With the gc disabled (as :func:`elastic_sim.sim.run` does), collect young reference cycles after
every this many scheduled callbacks: at points fixed by the run itself, so finalizers that
run then (a protocol generator's ``finally``) run at the same place every time."""


def _collect() -> None:
    if not gc.isenabled():
        gc.collect(1)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted()


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


class TieCall(Call):
    """A callback of a run with a tie seed: it carries its lane's salt, which becomes the
    running lane while it runs."""

    def __init__(self, kernel: Kernel, fn: Callable[..., object], args: tuple[Any, ...],
                 salt: int) -> None:
        super().__init__(kernel.env, fn, args)
        self.callbacks = _FIRE_TIE
        self.kernel = kernel
        self.salt = salt


def _fire_tie(ev: Event) -> None:
    call: TieCall = ev  # type: ignore[assignment]
    if not call.cancelled:
        call.kernel._salt = call.salt
        call.fn(*call.args)


_FIRE_TIE: list[Callable[[Any], None]] = [_fire_tie]

LIVELOCK_CALLS = 1_000_000
"""Callbacks scheduled at one instant of virtual time after which a run is a livelock: a
process busy-loops without letting time advance (nothing upstream does at one instant
takes a million steps; the shipped scenarios' busiest instant takes 90). A
world of more than 1,000 hosts gets 1,000 per host (:func:`livelock_threshold`)."""
LIVELOCK_SAMPLE = 1_000
"""Callbacks watched after the threshold to name the tasks that spin (the witness)."""
GUARD_EVERY = 10_000
"""The run's guard (wall clock, memory) is asked every this many scheduled callbacks."""


def livelock_threshold(hosts: int) -> int:
    """:data:`LIVELOCK_CALLS`, or 1,000 per host for a world of more than 1,000 hosts."""
    return max(LIVELOCK_CALLS, 1_000 * hosts)


class Stop:
    """Why a run was ended before its end: a livelock (with the spinning tasks) or a
    guard's limit."""

    def __init__(self, kind: str, message: str, spinning: Mapping[str, int] | None = None
                 ) -> None:
        self.kind = kind
        """``livelock``, or the guard's kind (``wall_limit``, ``memory_limit``)."""
        self.message = message
        self.spinning = dict(spinning or {})
        """For a livelock: the tasks (``host/proc:task``) that ran in the sampled
        callbacks, with how many of them each ran."""


INTERRUPT_SIGNAL = signal.SIGUSR2
"""While a run with a guard lasts, a Python-level handler of this signal ends it: a guard's
watchdog thread raises it in the main thread (``_thread.interrupt_main``) when one callback
runs too long or grows too big for the periodic check to see."""


class Interrupted(KeyboardInterrupt):
    """Raised in the kernel's thread to end the run at once (a KeyboardInterrupt, so a
    protocol task's ``except Exception`` or the task driver does not swallow it)."""


Guard = Callable[[], "tuple[str, str] | None"]
"""A run's guard: (kind, message) when the run must stop now, else None."""

LAST_KEYS = 4096
"""With a tie seed: (lane, time) keys kept before those of past times are dropped."""


class Kernel:
    """Virtual time and the event queue (a simpy Environment), and the trace output."""

    def __init__(self, emit: Callable[[TraceEvent], None], tie_seed: int | None = None) -> None:
        self.env = simpy.Environment()
        self.current: SimTask[Any] | None = None
        """The task being stepped right now (None between steps)."""
        self._emit = emit
        self.events = 0
        """Trace events emitted so far."""
        self.closed = False
        """Set when the run has ended: nothing more is traced."""
        self._calls = 0
        self.tie_seed = tie_seed
        """Seed of the order of same-time callbacks of different lanes (None: FIFO)."""
        self._tie_rng = random.Random(f"{tie_seed}/ties")
        self._lanes: dict[Hashable, int] = {}
        self._last_key: dict[tuple[int, float], float] = {}
        """The latest tie key of each (lane, time) still to come."""
        self._salt = self._tie_rng.getrandbits(64)
        """Salt of the lane running now (the lane of what runs before the first callback)."""
        self.livelock_calls = LIVELOCK_CALLS
        """Callbacks at one instant that make a livelock (:data:`LIVELOCK_CALLS`)."""
        self.guard: Guard | None = None
        """Asked every :data:`GUARD_EVERY` callbacks; (kind, message) ends the run."""
        self.stopped: Stop | None = None
        """Why the run was ended early (None: it was not)."""
        self._instant = -1.0
        self._at_instant = 0
        self._sample: dict[str, int] | None = None

    @property
    def now(self) -> float:
        """Virtual time in seconds."""
        return self.env.now

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any,
                   lane: Hashable = None) -> Call:
        """Run ``fn(*args)`` ``delay`` seconds from now (after everything already due then;
        with a tie seed, after what is due then in its lane: see the module docstring).
        ``lane`` names an ordered channel (None: the current task's or callback's lane)."""
        if self.tie_seed is None:
            call = Call(self.env, fn, args)
            self.env.schedule(call, NORMAL, delay)
        else:
            salt = self._lane_salt(lane)
            call = TieCall(self, fn, args, salt)
            self.env.schedule(call, self._tie_priority(salt, delay), delay)  # type: ignore[arg-type]
        self._calls += 1
        if self._calls % GUARD_EVERY == 0:
            self._periodic()
        now = self.env.now
        if now != self._instant:
            self._instant, self._at_instant = now, 0
        else:
            self._at_instant += 1
            if self._at_instant >= self.livelock_calls:
                self._watch_livelock(fn)
        return call

    def _periodic(self) -> None:
        if self._calls % COLLECT_EVERY == 0:
            self.env.schedule(Call(self.env, _collect, ()), NORMAL, 0.0)
        found = self.guard() if self.guard is not None else None
        if found is not None and self.stopped is None:
            self.end_now(Stop(*found))

    def _watch_livelock(self, fn: Callable[..., object]) -> None:
        """Past the threshold: sample which tasks the next callbacks step (or schedule
        them), then stop."""
        if self._sample is None:
            self._sample = {}
        task = getattr(fn, "__self__", None)
        if not hasattr(task, "owner"):
            task = self.current
        who = (getattr(fn, "__qualname__", "?") if task is None
               else f"{getattr(task.owner, 'name', '?')}:{getattr(task, 'name', '?')}")
        self._sample[who] = self._sample.get(who, 0) + 1
        if self._at_instant == self.livelock_calls + LIVELOCK_SAMPLE and self.stopped is None:
            spinning = dict(sorted(self._sample.items(), key=lambda kv: (-kv[1], kv[0])))
            self.end_now(Stop("livelock", f"{self._at_instant} callbacks at t={self.now:g} s "
                              "without virtual time advancing", spinning))

    def end_now(self, why: Stop) -> None:
        """End the run before anything else due now (a livelock, a guard's limit)."""
        self.stopped = why
        self.stop_after(0.0)

    def _tie_priority(self, salt: int, delay: float) -> float:
        """simpy orders (time, priority, id): a priority in [NORMAL, NORMAL + 1), random for
        a lane's first callback at a time and growing by a random step for each further
        one, interleaves lanes at random and keeps each lane FIFO (equal keys, once the
        steps fall below float precision, still run in scheduling order)."""
        t = self.env.now + delay
        last = self._last_key.get((salt, t))
        r = self._tie_rng.random()
        key = r if last is None else last + (1.0 - last) * 0.5 * r
        if len(self._last_key) >= LAST_KEYS:  # forget times that have passed
            now = self.env.now
            self._last_key = {s: k for s, k in self._last_key.items() if s[1] >= now}
        self._last_key[(salt, t)] = key
        return NORMAL + key

    def _lane_salt(self, lane: Hashable) -> int:
        if lane is None:
            task = self.current
            if task is None:
                return self._salt
            salt: int | None = task.tie_salt
            if salt is None:
                salt = self._tie_rng.getrandbits(64)
                task.tie_salt = salt
            return salt
        salt = self._lanes.get(lane)
        if salt is None:
            salt = self._lanes[lane] = self._tie_rng.getrandbits(64)
        return salt

    def call_at(self, t: float, fn: Callable[..., object], *args: Any,
                lane: Hashable = None) -> Call:
        """Run ``fn(*args)`` at virtual time ``t`` (now, if ``t`` has passed)."""
        delay = t - self.env.now
        return self.call_later(delay if delay > 0.0 else 0.0, fn, *args, lane=lane)

    def call_exactly(self, t: float, fn: Callable[..., object], *args: Any) -> Call:
        """Run ``fn(*args)`` at exactly ``t`` (>= now; no ``now + (t - now)`` rounding), in
        scheduling order: how a fast stretch (:mod:`elastic_sim.sim.stretch`) lands on the instants
        a chain of ``call_later`` would have reached. Not for runs with a tie seed."""
        if t < self.env.now:
            raise ValueError(f"call_exactly: {t} is in the past (now {self.env.now})")
        call = Call(self.env, fn, args)
        heapq.heappush(self.env._queue, (t, NORMAL, next(self.env._eid), call))
        self._calls += 1
        return call

    def soon(self, fn: Callable[..., object], *args: Any) -> Call:
        """Run ``fn(*args)`` at the current time, after what is already due now (with a tie
        seed: in its lane)."""
        return self.call_later(0.0, fn, *args)

    def stop_after(self, delay: float) -> None:
        """Stop :meth:`run` ``delay`` seconds from now, before anything else due then."""
        ev = Event(self.env)
        ev._ok = True
        ev._value = None
        ev.callbacks.append(StopSimulation.callback)
        self.env.schedule(ev, URGENT, delay)

    def run(self) -> None:
        """Process events until a stop or until nothing is scheduled. With a guard, an
        :data:`INTERRUPT_SIGNAL` raised meanwhile ends the run too (why: the guard's)."""
        guard = self.guard
        if guard is None or threading.current_thread() is not threading.main_thread():
            self.env.run()
            return
        previous = signal.signal(INTERRUPT_SIGNAL, _raise_interrupted)
        try:
            self.env.run()
        except Interrupted:
            found = guard() or ("interrupted", "the run's guard interrupted it")
            self.stopped = self.stopped or Stop(*found)
        finally:
            signal.signal(INTERRUPT_SIGNAL, previous)

    def trace(self, host: str, proc: str, kind: str, data: Mapping[str, Any]) -> None:
        """Emit one trace event stamped with the current virtual time."""
        if self.closed:
            return
        self.events += 1
        self._emit(TraceEvent(t=self.env.now, host=host, proc=proc, kind=kind, data=data))
