"""Telling a user why a run crawls: a run whose simulator works far harder per simulated
second than any shipped scenario does says so, once, naming the knob that makes it.

A knob can be legal and still make a run crawl: a keep-alive every 10 us, a heartbeat
that declares every node dead at once (``keep_alive_max_attempt: 0``) so the rendezvous
never settles. Such a run only ends at its wall limit; this notice says why, as soon as
the simulator has done enough work to tell. It counts what the kernel already counts
(it asks its guard every :data:`~elastic_sim.sim.kernel.GUARD_EVERY` callbacks) against
the simulated time the kernel has reached; nothing the run does changes.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from elastic_sim.sim.kernel import GUARD_EVERY
from elastic_sim.trace import TraceEvent

NORMAL_RATE = 80.0
"""The most kernel callbacks per simulated second per host a shipped scenario takes
(Horovod's found_spawn_to_dead_host_fails; most take under 40)."""
CRAWL_FACTOR = 100.0
"""A run that takes this many times :data:`NORMAL_RATE` crawls."""
WINDOW = 5
"""The rate is judged over windows of this many guard calls (50,000 callbacks): the
shipped scenarios take under 100,000 in all; a window in which simulated time stood
still is a busy loop at one instant, the livelock check's to report."""
WINDOWS = 2
"""Windows in a row at a crawl before the notice (a burst, such as a large rendezvous,
is not a crawl)."""

Guard = Callable[[], "tuple[str, str] | None"]


def suspects(knobs: Mapping[str, Any], defaults: Mapping[str, Any],
             step_time: float, default_step_time: float) -> list[str]:
    """The knobs (and the workload's step time) set below their defaults, the furthest
    below first, as ``name: value (default D)``."""
    scored: list[tuple[float, str]] = []
    given = {**knobs, "workload.step_time": step_time}
    base = {**defaults, "workload.step_time": default_step_time}
    for name, value in given.items():
        default = base.get(name)
        if isinstance(value, bool) or isinstance(default, bool):
            continue
        if not isinstance(value, int | float) or not isinstance(default, int | float):
            continue
        if 0 <= value < default:
            scored.append((default / value if value > 0 else float("inf"),
                           f"{name}: {value:g} (default {default:g})"))
    return [text for _, text in sorted(scored, key=lambda p: -p[0])]


class CrawlWatch:
    """The kernel's guard for one run (it asks ``guard`` as the kernel would) that also
    watches the work per simulated second, and ``say``\\ s the notice once."""

    def __init__(self, guard: Guard, hosts: int, culprits: list[str],
                 say: Callable[[str], None]) -> None:
        self.guard = guard
        self.hosts = max(1, hosts)
        self.culprits = culprits
        self.say = say
        self.asked = 0
        self.t = 0.0
        """The simulated time the trace has reached."""
        self.told = False
        self._since = 0.0
        """Where the current window began, in simulated time."""
        self._crawling = 0
        """Windows in a row at a crawl."""

    def seen(self, emit: Callable[[TraceEvent], None]) -> Callable[[TraceEvent], None]:
        """``emit``, also noting how far the trace has reached."""
        def emit_and_note(ev: TraceEvent) -> None:
            self.t = ev.t
            emit(ev)
        return emit_and_note

    def __call__(self) -> tuple[str, str] | None:
        if threading.current_thread() is threading.main_thread():
            self.asked += 1
            if not self.told and self.asked % WINDOW == 0:
                self.t = max(self.t, _callers_clock(sys._getframe(1)))
                self._judge()
        return self.guard()

    def _judge(self) -> None:
        spent, self._since = self.t - self._since, self.t
        if spent <= 0:  # time stood still: a livelock, not a crawl
            self._crawling = 0
            return
        rate = WINDOW * GUARD_EVERY / spent / self.hosts
        self._crawling = self._crawling + 1 if rate >= NORMAL_RATE * CRAWL_FACTOR else 0
        if self._crawling < WINDOWS:
            return
        self.told = True
        why = (f"{self.culprits[0]} makes it" if self.culprits else
               "no knob is below its default: the scenario itself is this busy")
        more = f" (also below their defaults: {', '.join(self.culprits[1:3])})" \
            if len(self.culprits) > 1 else ""
        self.say(f"note: this run crawls: the simulator does about {rate:,.0f} callbacks per "
                 f"simulated second per host, over {CRAWL_FACTOR:g} times the most a shipped "
                 f"scenario takes ({NORMAL_RATE:g}); {why}{more}; it ends at its time "
                 "limit or --wall-limit")


def _callers_clock(frame: FrameType) -> float:
    """The simulated time of the kernel asking its guard (the caller, ``Kernel._periodic``:
    a crawl's work may trace nothing, so the trace's time can stand still while the
    kernel's advances); 0 if the caller is not a kernel."""
    env = getattr(frame.f_locals.get("self"), "env", None)
    now = getattr(env, "now", 0.0)
    return float(now) if isinstance(now, int | float) else 0.0


def knob_defaults(knobs_class: type[Any] | None) -> dict[str, Any]:
    """The defaults of a protocol's knobs (none without a knobs class)."""
    if knobs_class is None:
        return {}
    return {f.name: getattr(knobs_class(), f.name) for f in dataclasses.fields(knobs_class)}
