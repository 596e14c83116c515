"""A campaign's progress for a log: when standard error is not a terminal (CI, a pipe, a
file), one line there at least every :data:`EVERY` seconds while the campaign runs, and
one at its end: what is done, what was found, the rate and what is left. On a terminal
nothing is printed here (the progress bar shows it).

The periodic line comes from an interval timer (``SIGALRM``), not a thread: a campaign's
worker processes fork from this one only while it runs no other thread
(:func:`elastic_sim.campaign.start_method`), and a case that takes longer than the period
must not silence the log. The handler writes one ``os.write``, safe at any point.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

EVERY = float(os.environ.get("ELASTIC_SIM_PROGRESS_EVERY") or 10.0)
"""Seconds between progress lines at most (``ELASTIC_SIM_PROGRESS_EVERY`` sets it)."""


class Ticker:
    """Progress lines for ``label`` (e.g. ``explore scale_down``): ``done`` of ``total``
    ``unit`` (None: open-ended; ``deadline_s``: a time budget instead), with the counts
    the caller passes to :meth:`update`."""

    def __init__(self, label: str, total: int | None, unit: str = "cases",
                 deadline_s: float | None = None, every: float = EVERY,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.deadline_s = deadline_s
        self.every = every
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.counts: dict[str, Any] = {}
        self.active = not _is_terminal(self.stream)
        self._previous: Any = None

    def __enter__(self) -> Ticker:
        self.started = self.clock()
        if self.active and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._ring)
            signal.setitimer(signal.ITIMER_REAL, self.every, self.every)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._previous = None
        if self.active:
            self._write(self.line(final=True))

    def update(self, done: int, **counts: Any) -> None:
        """What is done now (the next line says it)."""
        self.done = done
        self.counts.update(counts)

    def line(self, final: bool = False) -> str:
        """The progress line now."""
        elapsed = max(self.clock() - self.started, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        parts = [f"{self.done}{of} {self.unit}"]
        parts += [f"{v} {k}" for k, v in self.counts.items()]
        rate = 60.0 * self.done / elapsed
        parts.append(f"{rate:.1f} {self.unit}/min")
        if final:
            parts.append(f"done in {elapsed:.0f} s")
        elif self.total is not None and self.done:
            parts.append(f"ETA {elapsed * (self.total - self.done) / self.done:.0f} s")
        elif self.deadline_s is not None:
            parts.append(f"{max(0.0, self.deadline_s - elapsed):.0f} s left")
        else:
            parts.append(f"{elapsed:.0f} s so far")
        return f"{self.label}: " + ", ".join(parts)

    def _ring(self, signum: int, frame: object) -> None:
        self._write(self.line())

    def _write(self, line: str) -> None:
        try:
            os.write(self.stream.fileno(), (line + "\n").encode())
        except (OSError, ValueError, AttributeError):  # no file descriptor (a test's buffer)
            self.stream.write(line + "\n")
            self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
