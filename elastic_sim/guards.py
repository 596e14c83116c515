"""Guards of the tool itself: a run that would take longer than a wall-clock limit or grow
past a memory limit is ended, keeping what was traced so far, with a distinct outcome.

They protect an unattended caller (CI, a search) from a run that is legal but too big; a
run that busy-loops at one instant is caught by the simulator instead (a livelock, a
finding about the protocol: :data:`elastic_sim.sim.kernel.LIVELOCK_CALLS`). The sim asks its guard
every :data:`elastic_sim.sim.kernel.GUARD_EVERY` callbacks, real mode every supervision tick.
"""

from __future__ import annotations

import _thread
import os
import resource
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_WALL_LIMIT = 1800.0
"""Seconds of wall time one run may take (``--wall-limit``); the shipped scenarios take
under a minute each in the sim."""
WATCH_PERIOD = 0.25
"""Seconds between a watchdog's looks at the guard (a single long callback of the sim is
stopped within about this long of passing a limit)."""
MEMORY_SHARE = 0.5
"""The default memory limit: this share of the machine's physical memory."""
WRAP_UP_RATIO = 1.5
"""Seconds a run needs, per second it ran, to read what it traced, work out its metrics,
judge why it stopped, write its summary and exit: a run is stopped that much before its
wall limit, so that the whole command ends within it. Measured on this project's 2-core
machine with a sim run traced at full speed (tests/data/busy.yaml, --wall-limit 30): at
1.0 the command took 32.6 s at rest and 34.3 s in CI beside a second test worker (the
metrics now read the whole history once it ended); at 1.5, 27.3 s at rest."""
WRAP_UP_SHARE = 0.1
"""Beyond the wall limit, the share of it a stopped run may still take to write its
trace and summary (the estimate above can be short): checks that do not fit are not
judged, saying why, and the reports are left to ``elastic-sim report``."""


def physical_memory() -> int:
    """Bytes of physical memory of this machine (0 if unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def default_memory_limit() -> int:
    """Bytes a run may hold by default: :data:`MEMORY_SHARE` of physical memory (8 GiB if
    that is unknown)."""
    total = physical_memory()
    return int(total * MEMORY_SHARE) if total > 0 else 8 << 30


def rss_bytes() -> int:
    """This process's resident memory now (its peak where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * 1024


class RunGuard:
    """The limits of one run: call it to learn whether the run must stop now.

    Returns ``(kind, message)`` once a limit is passed (``wall_limit`` or
    ``memory_limit``), else None; once passed, always that answer. The clock starts at
    construction (or :meth:`restart`)."""

    def __init__(self, wall_limit: float | None = DEFAULT_WALL_LIMIT,
                 memory_limit: int | None = None, *, since: float = 0.0) -> None:
        self.wall_limit = wall_limit
        """Seconds (None: no limit)."""
        self.memory_limit = default_memory_limit() if memory_limit is None else memory_limit
        """Bytes of resident memory (0: no limit)."""
        self.started = time.monotonic() - since
        """When the clock started (``since`` seconds ago: the command's own start, for a
        limit on what the user waits for)."""
        self.tripped: tuple[str, str] | None = None
        """The first limit passed, with its message (sticky)."""
        self.run_started: float | None = None
        """When the run itself began (:meth:`begin_run`): what it runs from then on has to
        be read and judged before the limit."""

    def restart(self) -> None:
        """Start the wall clock again (a run begins now), forgetting an earlier trip."""
        self.started = time.monotonic()
        self.tripped = None
        self.run_started = None

    def begin_run(self) -> None:
        """The run begins now: from here on, the time it will need to wrap up grows with
        the time it runs (:data:`WRAP_UP_RATIO`)."""
        self.run_started = time.monotonic()

    def wrap_up_left(self) -> float | None:
        """Seconds left to wrap up a run this guard stopped (:data:`WRAP_UP_SHARE`); None
        without a wall limit."""
        if self.wall_limit is None:
            return None
        return self.started + self.wall_limit * (1 + WRAP_UP_SHARE) - time.monotonic()

    def __call__(self) -> tuple[str, str] | None:
        if self.tripped is None:
            self.tripped = self._check()
        return self.tripped

    def _check(self) -> tuple[str, str] | None:
        if self.wall_limit is not None:
            now = time.monotonic()
            ran = 0.0 if self.run_started is None else now - self.run_started
            if now - self.started + WRAP_UP_RATIO * ran > self.wall_limit:
                return "wall_limit", (f"the run took more than {self.wall_limit:g} s of wall "
                                      "time (--wall-limit), counting what judging and "
                                      "writing what it traced takes")
        if self.memory_limit:
            rss = rss_bytes()
            if rss > self.memory_limit:
                return "memory_limit", (f"the run holds {rss >> 20} MiB, more than its "
                                        f"{self.memory_limit >> 20} MiB (--memory-limit)")
        return None


@contextmanager
def watchdog(guard: RunGuard) -> Iterator[None]:
    """While the block runs, a thread looks at ``guard`` every :data:`WATCH_PERIOD` seconds
    and, once it has tripped, interrupts the main thread (the sim kernel's
    :data:`~elastic_sim.sim.kernel.INTERRUPT_SIGNAL` handler ends the run; where no handler is set,
    nothing happens). For a sim callback that runs for minutes or takes gigabytes at once,
    which the kernel's periodic check would only see afterwards.

    It interrupts once: a second interrupt would land while the first is being handled
    (the kernel winding the run down, the trace being written) and end the command with
    nothing written. Should the one interrupt meet a handler that swallows it, the
    kernel's own periodic look at the guard still ends the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from elastic_sim.sim.kernel import INTERRUPT_SIGNAL  # the simulator only once a run starts

    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_PERIOD):
            if guard() is not None:
                _thread.interrupt_main(INTERRUPT_SIGNAL)
                return

    thread = threading.Thread(target=watch, name="elastic-sim-guard", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
