"""The fault injector of real mode: the fault vocabulary turned into signals and network
rules, through one handler table (:data:`REAL_HANDLERS`).

``CrashHost`` SIGKILLs the host's process group, ``CrashProcess`` one process,
``HangHost`` SIGSTOPs the group and SIGCONTs it after ``duration``. ``Preempt`` and
``ScaleDown`` SIGTERM the group and SIGKILL what is left after ``grace``. ``Straggler``
slows the group down for real by duty-cycling it: in every :data:`STRAGGLE_PERIOD` it runs
``1/factor`` of the time and is SIGSTOPped for the rest. Partitions (symmetric, one-way,
isolate, isolate_store, bridge) cut the network for real: the launcher runs such a world
in a network namespace of its own (:mod:`.netns`) and the injector adds and removes its
drop rules; link faults shape the same connections with ``tc netem`` there
(:mod:`.shaping`) and connection resets abort them (:mod:`.connreset`). A type real mode
cannot produce honestly has a :class:`~elastic_sim.faults.model.Refusal` as its handler,
and a scenario with it is refused before a run starts, never faked. Fault events are
encoded by :func:`elastic_sim.faults.record.fault_event` (the sim's encoder) and the
reports read back from them.
"""

from __future__ import annotations

import heapq
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.faults.model import (
    ClockJump,
    ClockSkew,
    CollectiveFault,
    ConnReset,
    CrashHost,
    CrashLoop,
    CrashProcess,
    CrashRestart,
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    Fault,
    GpuWedge,
    HangHost,
    LinkFault,
    OneWayPartition,
    Partition,
    PowerOff,
    Preempt,
    Refusal,
    ScaleDown,
    ScaleUp,
    Signal,
    SlowStart,
    StoreCrash,
    StoreFreeze,
    Straggler,
    Wedge,
    handler_for,
)
from elastic_sim.faults.record import INJECTOR, FaultLedger, fault_event
from elastic_sim.faults.triggers import Triggered
from elastic_sim.real.faults import netns, shaping
from elastic_sim.real.faults.targets import Targets
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport, World

__all__ = ["INJECTOR", "REAL_HANDLERS", "Injector", "UnsupportedInRealMode",
           "check_supported", "real_handler", "why_unsupported"]


class UnsupportedInRealMode(ValueError):
    """A scheduled fault cannot be injected for real; raised before anything starts."""


STRAGGLE_PERIOD = 0.5
"""Seconds of one run/stop cycle of a real straggler."""

TRIGGERS_REFUSED = ("faults triggered by trace events need the injector to follow the "
                    "merged trace live, which real mode does not do yet (use a time 'at')")


def why_unsupported(fault: Fault) -> str:
    """Why real mode cannot inject ``fault`` ("" if it can)."""
    if isinstance(fault, Triggered):
        return TRIGGERS_REFUSED
    handler = real_handler(type(fault))
    if handler is None:
        return f"real mode has no handler for {fault.type} faults"
    if isinstance(handler, Refusal):
        return handler.reason
    if isinstance(fault, LinkFault):
        lacking = shaping.missing()
        return (f"link faults are shaped with tc netem in the run's network namespace, "
                f"and {lacking}") if lacking else ""
    if isinstance(fault, ConnReset):
        lacking = netns.missing()
        return (f"connection resets abort the connections of the run's network namespace "
                f"(its conntrack table, ss -K) and {lacking}") if lacking else ""
    if isinstance(fault, netns.CUT_TYPES):
        lacking = netns.missing()
        return (f"{fault.type} faults need a real network cut (a network namespace with "
                f"nftables rules) and {lacking}") if lacking else ""
    return ""


def check_supported(world: World, faults: Sequence[Fault]) -> None:
    """Refuse faults real mode cannot inject, and faults naming hosts that do not exist."""
    for fault in faults:
        why = why_unsupported(fault)
        if why:
            raise UnsupportedInRealMode(
                f"fault {fault.id!r} ({fault.type}): {why}; run this scenario with --mode sim")
        for host in fault.hosts():
            if host not in world.host_names:
                raise ValueError(f"fault {fault.id!r}: no host named {host!r} in the world")


@dataclass(order=True)
class _Action:
    at: float
    seq: int
    run: Callable[[float], None] = field(compare=False)
    fault: Fault | None = field(compare=False, default=None)
    """Set for a fault's start (the run ended before it if it is still queued)."""


@dataclass(frozen=True)
class Kill:
    """A process or host the injector killed: when, and by which fault."""

    t: float
    fault_id: str


class Injector:
    """Fires a schedule of faults at the targets as run time passes."""

    def __init__(self, faults: Sequence[Fault], targets: Targets, trace: TraceFile,
                 clock: Callable[[], float]) -> None:
        self._targets = targets
        self._clock = clock
        """Run time now (an action that takes time, such as loading a cut, reads it after)."""
        self._trace = trace
        self._faults = list(faults)
        self._queue: list[_Action] = []
        self._seq = 0
        for f in faults:
            self._push(f.at, self._starter(f), f)
        self.ledger = FaultLedger()
        self.host_kills: dict[str, Kill] = {}
        """Hosts crashed, by name."""
        self.proc_kills: dict[str, Kill] = {}
        """Processes crashed, by name."""

    def next_due(self) -> float:
        """Run time of the next action (infinity when none is left)."""
        return self._queue[0].at if self._queue else float("inf")

    def fire_due(self, now: float) -> None:
        """Apply every action due by run time ``now``."""
        while self._queue and self._queue[0].at <= now:
            heapq.heappop(self._queue).run(now)

    def _push(self, at: float, run: Callable[[float], None], fault: Fault | None = None) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Action(at, self._seq, run, fault))

    def reports(self, end: float) -> list[FaultReport]:
        """Whether each fault fired, read back from the fault events it traced."""
        return self.ledger.reports(self._faults, end)

    def _starter(self, fault: Fault) -> Callable[[float], None]:
        return lambda now: self._start(fault, now)

    def _start(self, fault: Fault, now: float) -> None:
        handler = real_handler(type(fault))
        if handler is None or isinstance(handler, Refusal):  # check_supported refused it
            why = handler.reason if handler else "no real-mode handler"
            self._event(fault, now, "skipped", why)
            return
        why_not, now = handler(self, fault, now)
        self._event(fault, now, "skipped" if why_not else "start", why_not)

    def _event(self, fault: Fault, now: float, phase: str, reason: str) -> None:
        host, data = fault_event(fault, phase, reason)
        ev = TraceEvent(t=now, host=host, proc=INJECTOR, kind="fault", data=data)
        self._trace.write(ev)
        self.ledger.observe(ev)

    def _gone(self, host: str) -> str:
        return f"host {host}: every process had already exited"

    # -- handlers: each returns (why not, "" if done; the run time it took effect) --------

    def _crash(self, fault: CrashHost, now: float) -> tuple[str, float]:
        if not self._targets.signal_host(fault.host, signal.SIGKILL):
            return self._gone(fault.host), now
        self.host_kills[fault.host] = Kill(now, fault.id)
        return "", now

    def _crash_process(self, fault: CrashProcess, now: float) -> tuple[str, float]:
        why_not = self._targets.signal_proc(fault.proc, signal.SIGKILL)
        if not why_not:
            self.proc_kills[fault.proc] = Kill(now, fault.id)
        return why_not, now

    def _hang(self, fault: HangHost, now: float) -> tuple[str, float]:
        if not self._targets.signal_host(fault.host, signal.SIGSTOP):
            return self._gone(fault.host), now
        self._push(now + fault.duration, lambda t: self._cont(fault, t))
        return "", now

    def _cont(self, fault: HangHost | Straggler, now: float) -> None:
        if self._targets.signal_host(fault.host, signal.SIGCONT):
            self._event(fault, now, "heal", "")

    def _preempt(self, fault: Preempt | ScaleDown, now: float) -> tuple[str, float]:
        if not self._targets.signal_host(fault.host, signal.SIGTERM):
            return self._gone(fault.host), now

        def kill(t: float) -> None:
            if self._targets.signal_host(fault.host, signal.SIGKILL):
                self.host_kills[fault.host] = Kill(t, fault.id)
                self._event(fault, t, "heal", "grace over: SIGKILL to what is left")
        self._push(now + fault.grace, kill)
        return "", now

    def _start_fault(self, fault: CrashLoop | SlowStart, now: float) -> tuple[str, float]:
        return self._targets.start_fault(fault), now

    def _power_off(self, fault: PowerOff, now: float) -> tuple[str, float]:
        # Drop first, for good: the kills' FINs and RSTs then never reach a peer.
        why_not = self._targets.cut(fault)
        if why_not:
            return why_not, now
        if not self._targets.signal_host(fault.host, signal.SIGKILL):
            return self._gone(fault.host), now
        self.host_kills[fault.host] = Kill(now, fault.id)
        return "", now

    def _signal(self, fault: Signal, now: float) -> tuple[str, float]:
        return self._targets.signal_role(fault.host, fault.to,
                                         signal.Signals[f"SIG{fault.signal}"]), now

    def _conn_reset(self, fault: ConnReset, now: float) -> tuple[str, float]:
        why_not, _ = self._targets.reset(fault)
        return why_not, now

    def _partition(self, fault: Partition | OneWayPartition | LinkFault,
                   now: float) -> tuple[str, float]:
        why_not = self._targets.cut(fault)
        # Loading the rules takes milliseconds: the cut is in force from here on, not
        # from when it was due. (A heal is traced before its rules go: the traced
        # interval is one in which the cut certainly held.)
        now = self._clock()
        if not why_not:
            self._push(now + fault.duration,
                       lambda t: self._event(fault, t, "heal", self._targets.heal(fault)))
        return why_not, now

    def _straggler(self, fault: Straggler, now: float) -> tuple[str, float]:
        if not self._targets.signal_host(fault.host, signal.SIGSTOP):
            return self._gone(fault.host), now
        healed_at = now + fault.duration
        healed = False

        def cont(t: float) -> None:
            if t < healed_at and not healed:
                self._targets.signal_host(fault.host, signal.SIGCONT)
                self._push(t + STRAGGLE_PERIOD / fault.factor, stop)

        def stop(t: float) -> None:
            if t < healed_at and not healed and self._targets.signal_host(
                    fault.host, signal.SIGSTOP):
                self._push(t + STRAGGLE_PERIOD * (1 - 1 / fault.factor), cont)

        def heal(t: float) -> None:
            nonlocal healed
            healed = True
            self._cont(fault, t)
        self._push(now + STRAGGLE_PERIOD * (1 - 1 / fault.factor), cont)
        self._push(healed_at, heal)
        return "", now


RealHandler = Callable[[Injector, Any, float], tuple[str, float]]

_NO_RESTART = Refusal("starting a host's process again during a run is not supported by "
                      "the real launcher yet")
_NO_DISCOVERY = Refusal(
    "discovery-source faults need the real launcher to rewrite what the protocol's "
    "discovery source reports (an overlay file the processes read), which it does not do yet")
_NO_STORE = Refusal("the store server runs inside a host's process; real mode cannot crash "
                    "or freeze it alone")
_NO_CLOCK = Refusal("clock faults need a per-host clock (time namespaces or libfaketime), "
                    "which real mode does not set up yet")

REAL_HANDLERS: dict[type[Fault], RealHandler | Refusal] = {
    CrashHost: Injector._crash,
    CrashProcess: Injector._crash_process,
    PowerOff: Injector._power_off,
    HangHost: Injector._hang,
    Preempt: Injector._preempt,
    ScaleDown: Injector._preempt,
    Straggler: Injector._straggler,
    Signal: Injector._signal,
    Partition: Injector._partition,
    OneWayPartition: Injector._partition,
    LinkFault: Injector._partition,
    Wedge: Refusal("a wedge stops one named activity of a live process (an asyncio task "
                   "such as the agent's main loop) at its next await while the process's "
                   "other tasks go on; the real runtime has no channel through which the "
                   "injector could suspend a single task of a running process (a signal "
                   "stops the whole process: that is a 'hang'), and torchrun mode runs "
                   "upstream's threads, which cannot be paused one at a time"),
    GpuWedge: Refusal("a gpu_wedge leaves a process's CUDA and NCCL calls blocked inside the "
                      "GPU driver for good; real mode has no way to make a GPU or its driver "
                      "hang on purpose (a SIGSTOP freezes the whole process, watchdog and "
                      "heartbeat monitor included: that is a 'hang')"),
    ConnReset: Injector._conn_reset,
    ClockSkew: _NO_CLOCK,
    ClockJump: _NO_CLOCK,
    CrashRestart: _NO_RESTART,
    ScaleUp: _NO_RESTART,
    SlowStart: Injector._start_fault,
    CrashLoop: Injector._start_fault,
    StoreCrash: _NO_STORE,
    StoreFreeze: _NO_STORE,
    CollectiveFault: Refusal("real mode cannot make one Gloo collective fail or hang on "
                             "purpose"),
    DiscoveryAdd: _NO_DISCOVERY,
    DiscoveryRemove: _NO_DISCOVERY,
    DiscoveryScriptError: _NO_DISCOVERY,
    DiscoveryScriptHang: _NO_DISCOVERY,
}
"""Real mode's handler for every fault type, or the reason it refuses it. Subclasses of a
type with a handler (isolate, isolate_store, bridge: partitions) share it
(:func:`real_handler`)."""


def real_handler(cls: type[Fault]) -> RealHandler | Refusal | None:
    """Real mode's handler for fault class ``cls``
    (:func:`elastic_sim.faults.model.handler_for`)."""
    return handler_for(REAL_HANDLERS, cls)
