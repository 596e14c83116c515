"""Host clocks: a wall clock with offset, drift and jumps; a monotonic clock with drift."""

from __future__ import annotations


class HostClock:
    """One host's clocks, as functions of true (virtual) time.

    ``wall(t) = offset + (1 + drift) * t``. ``offset`` may change while the run goes on
    (:meth:`jump`: an NTP step or an operator's ``date -s``); the monotonic clock never jumps.
    """

    def __init__(self, offset: float = 0.0, drift: float = 0.0) -> None:
        self.offset = offset
        self.drift = drift

    def wall(self, t: float) -> float:
        """The host's wall clock at true time ``t``."""
        return self.offset + (1.0 + self.drift) * t

    def monotonic(self, t: float, since: float) -> float:
        """Seconds elapsed on this host's monotonic clock between true times ``since`` and ``t``."""
        return (1.0 + self.drift) * (t - since)

    def jump(self, delta: float) -> None:
        """Step the wall clock by ``delta`` seconds (forwards or backwards)."""
        self.offset += delta
