"""What the local launcher and torchrun mode's launcher share in supervising a run on
this machine: the frame of a run (:func:`contained`), each host's first process as
started (:class:`Leader`), the READY/GO handshake (:class:`Handshake`), and the loop that
fires faults until the hosts have exited (:class:`Supervisor`).

What differs stays with each launcher: the first process it starts (real mode's
``python -m elastic_sim.real.proc``, or a torchrun agent), how long it waits for READY and
what it says when one is late, how it finds and kills a host's other processes (a process
group and the command-line marker, or an environment marker), and which orphans it reaps.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from elastic_sim.real.faults import netns
from elastic_sim.real.supervisor import reaper
from elastic_sim.real.supervisor.tail import TraceTail
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.world import World

if TYPE_CHECKING:  # the injector's targets name this module's Leader
    from elastic_sim.real.faults.injector import Injector

Guard = Callable[[], "tuple[str, str] | None"]
"""A run's guard: (kind, message) when the run must stop now."""


@dataclass
class Handshake:
    """Where a leader says READY (``ready``, read here) and is told GO (``go``, written
    here): its stdout and stdin, or a pair of pipes of their own (torchrun mode's agents,
    whose stdout their workers inherit, so it must stay open for as long as they run)."""

    ready: IO[bytes]
    go: IO[bytes]

    @classmethod
    def of(cls, proc: subprocess.Popen[bytes]) -> Handshake:
        """The process's stdout and stdin (both started as pipes)."""
        assert proc.stdout is not None and proc.stdin is not None
        return cls(proc.stdout, proc.stdin)

    def send_go(self, t0: float) -> None:
        """Tell a ready leader ``GO <t0>`` and close both ends (a leader that died just
        now is seen exiting by the supervision loop)."""
        try:
            self.go.write(f"GO {t0!r}\n".encode())
            self.go.flush()
        except BrokenPipeError:
            pass
        self.close()

    def close(self) -> None:
        """Close the launcher's ends."""
        for end in (self.go, self.ready):
            if not end.closed:
                try:
                    end.close()
                except BrokenPipeError:  # unflushed GO to a leader gone meanwhile
                    pass


@dataclass
class Leader:
    """A host's first process (real mode's host process, torchrun mode's agent), as the
    launcher started it: in a session of its own, READY expected on its handshake's
    ``ready`` end, GO to be written to its ``go`` end."""

    host: str
    name: str
    """Its process name (``h0/main``)."""
    proc: subprocess.Popen[bytes]
    go_at: float = float("-inf")
    """Run time at which it is told GO (-inf: as soon as the run's origin is fixed)."""
    went: bool = False
    """Whether it has been told GO."""
    exit_t: float | None = None
    """Run time at which the launcher saw it exit."""
    handshake: Handshake | None = None
    """Its READY/GO channel (None: its stdout and stdin)."""

    def __post_init__(self) -> None:
        if self.handshake is None:
            self.handshake = Handshake.of(self.proc)

    @property
    def channel(self) -> Handshake:
        """Its READY/GO channel."""
        assert self.handshake is not None
        return self.handshake


class Supervisor:
    """A run's leaders watched until they have all exited, the run's faults fired on
    time meanwhile (see the module docstring). A launcher subclasses it with how it
    starts its leaders, waits for them, kills what is left and reaps orphans."""

    TICK = 0.1
    """Longest sleep of the supervision loop (an exit seen through a pidfd wakes it)."""

    def __init__(self, world: World, trace: TraceFile, guard: Guard | None = None,
                 tail: TraceTail | None = None) -> None:
        self.world = world
        self.leaders: dict[str, Leader] = {}
        """The hosts' first processes, by host name."""
        self.t0 = 0.0
        self.netns: netns.Namespace | None = None
        """The run's network namespace, when it has one."""
        self._trace = trace
        self.guard = guard
        """Asked every supervision tick: (kind, message) ends the run (a wall-clock limit)."""
        self.stopped: tuple[str, str] | None = None
        self._tail = tail
        """Live progress: the run's events as they are written (not in merged order)."""

    # -- what a launcher says ----------------------------------------------------------

    def _start(self) -> None:
        """Start every leader (into :attr:`leaders`)."""
        raise NotImplementedError

    def _wait_ready(self) -> None:
        """Wait until every leader has said READY (raise LaunchError if one cannot)."""
        raise NotImplementedError

    def _reap(self, now: float) -> None:
        """Reap the run's orphans that were reparented to this (subreaper) process."""
        raise NotImplementedError

    def _kill_everything(self) -> None:
        """Kill every process of the run and reap what falls to this process."""
        raise NotImplementedError

    def _origin(self) -> float:
        """The run's time origin on this machine's clock (a cluster node is told it)."""
        return time.time()

    def _should_stop(self) -> bool:
        """Whether to end the run before its leaders exit (a cluster node: when told)."""
        return False

    def _job_over(self) -> bool:
        """Whether the run is over although leaders still run: every one left stands for a
        daemon outside the job (:meth:`~elastic_sim.protocols.api.Runtime.detach`) and
        nothing else of the run lives. The run then ends as if they had exited."""
        return False

    # -- the run ---------------------------------------------------------------------------

    def _supervised(self, injector: Injector) -> bool:
        """Start the leaders, wait until all are ready, fix the run's origin and supervise;
        whatever happens, everything is killed before the namespace goes. True if the
        run ended before every leader had exited."""
        with contained(self.netns, self._kill_everything):
            self._start()
            self._wait_ready()
            self.t0 = self._origin()
            return self._supervise(injector)

    def _now(self) -> float:
        return time.time() - self.t0

    def _supervise(self, injector: Injector) -> bool:
        """Tell each leader GO at its time and fire faults until every leader has
        exited; True if the time limit, the caller or the guard came first."""
        with selectors.DefaultSelector() as sel:
            for leader in self.leaders.values():
                try:
                    sel.register(os.pidfd_open(leader.proc.pid), selectors.EVENT_READ)
                except (AttributeError, OSError):
                    pass  # no pidfds: the tick notices exits instead
            try:
                while True:
                    now = self._now()
                    self._go_due(now)
                    self._note_exits(now)
                    injector.fire_due(now)
                    if self._tail is not None:
                        self._tail.poll()
                    if (all(h.exit_t is not None for h in self.leaders.values())
                            or self._job_over()):
                        return False
                    if now >= self.world.time_limit or self._should_stop():
                        return True
                    if self._guard_stops(now):
                        return True
                    self._reap(now)
                    pending = [h.go_at for h in self.leaders.values() if not h.went]
                    wake = min([injector.next_due(), self.world.time_limit, *pending])
                    sel.select(min(max(0.0, wake - self._now()), self.TICK))
            finally:
                for key in list(sel.get_map().values()):
                    os.close(int(key.fd))

    def _go_due(self, now: float) -> None:
        for leader in self.leaders.values():
            if not leader.went and leader.go_at <= now:
                leader.went = True
                leader.channel.send_go(self.t0)

    def _note_exits(self, now: float) -> None:
        for leader in self.leaders.values():
            if leader.exit_t is None and leader.proc.poll() is not None:
                leader.exit_t = now

    def _guard_stops(self, now: float) -> bool:
        """Whether the run's guard ends the run now (traced as ``run_stopped``)."""
        found = self.guard() if self.guard is not None else None
        if found is None:
            return False
        self.stopped = found
        self._trace.event(now, "*", "elastic-sim", "run_stopped",
                          {"reason": found[0], "message": found[1]})
        return True

    def _close_pipes(self) -> None:
        """Close the launcher's ends of every leader's handshake (after the kill)."""
        for leader in self.leaders.values():
            leader.channel.close()


@contextmanager
def contained(ns: netns.Namespace | None, kill: Callable[[], None]) -> Iterator[None]:
    """The frame of a run: while it lasts, orphans are adopted (this process is a
    subreaper), SIGTERM raises like Ctrl-C, and the namespace ``ns`` (if any) exists; at
    its end, whatever happens, ``kill`` runs with SIGINT/SIGTERM held, then the namespace
    is deleted."""
    was_subreaper = reaper.set_subreaper(True)
    try:
        with interrupts_raise():
            try:
                if ns is not None:
                    ns.create()
                yield
            finally:
                with _signals_deferred():
                    try:
                        kill()
                    finally:
                        if ns is not None:
                            ns.delete()
    finally:
        reaper.set_subreaper(was_subreaper)


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """While a run lasts, SIGTERM raises SystemExit like Ctrl-C raises KeyboardInterrupt,
    so the cleanup in ``finally`` runs (only the main thread can take signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _terminate(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while cleaning up; they are delivered (and raise) afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
