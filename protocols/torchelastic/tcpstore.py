"""How long upstream's ``TCPStore`` client takes to give up on an address where nobody
answers: c10d retries with back-off past the timeout it was given.

Upstream (torch 2.13, ``TCPStore``'s client constructor over ``Socket::connect``): one
``ExponentialBackoffWithJitter`` (first interval 0.5 s, x1.5 per draw, each draw uniform
within +-50% of the interval, whole milliseconds, interval capped at 60 s) is shared by two
loops. The socket's connect loop has a deadline of ``timeout`` from its start: after a
refused attempt it sleeps the next draw if that still ends before the deadline, else it
raises a timeout. The constructor catches that, and unless ``timeout`` has passed since
it began, sleeps the next draw and runs a whole new connect loop (with a fresh deadline);
so with ``timeout`` 10 s it typically gives up after 15-25 s ("TCP client failed to
connect/validate ... retrying (try=0, ... delay=...)" then "timed out (try=1)" in a
worker's log). The runtime contract's ``connect_store`` fails at ``timeout``; this module
adds what upstream spends beyond it.
"""

from __future__ import annotations

import random

from elastic_sim.protocols.api import Runtime, Store, StoreConnectionError

FIRST_INTERVAL_MS = 500
MULTIPLIER = 1.5
RANDOMIZATION = 0.5
MAX_INTERVAL_MS = 60_000


class Backoff:
    """Upstream's ``ExponentialBackoffWithJitter`` with its defaults, in seconds."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._current_ms = 0

    def next(self) -> float:
        """The next delay (and the interval grows)."""
        if self._current_ms == 0:
            self._current_ms = FIRST_INTERVAL_MS
        spread = int(RANDOMIZATION * self._current_ms)
        delay = self._rng.randint(self._current_ms - spread, self._current_ms + spread)
        self._current_ms = min(int(self._current_ms * MULTIPLIER), MAX_INTERVAL_MS)
        return delay / 1000.0


def give_up_after(timeout: float, rng: random.Random) -> float:
    """Seconds from the constructor's start until it raises, every attempt refused."""
    backoff = Backoff(rng)
    t = 0.0
    while True:
        deadline = t + timeout  # this try's socket connect loop
        while True:
            delay = backoff.next()
            if t >= deadline - delay:
                break  # "The client socket has timed out after ..."
            t += delay
        if t > timeout:
            return t  # "TCP client failed to connect/validate ... timed out (try=N)"
        t += backoff.next()  # "... retrying (try=N, delay=...)"


async def connect(rt: Runtime, addr: str, timeout: float) -> Store:
    """A client of the store at ``addr`` as upstream's ``TCPStore(addr, timeout)``: it
    keeps trying until upstream would give up, then StoreConnectionError."""
    start = rt.now()
    try:
        return await rt.connect_store(addr, timeout)
    except StoreConnectionError:
        pass
    total = give_up_after(timeout, rt.rng)
    left = total - (rt.now() - start)
    try:
        if left > 0:
            return await rt.connect_store(addr, left)
    except StoreConnectionError:
        pass
    raise StoreConnectionError(f"no store server at {addr}: c10d's TCPStore client gave up "
                               f"after {total:.1f}s (timeout {timeout:g}s, retried with "
                               "back-off)")
