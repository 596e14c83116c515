"""The fault injector of real mode: the fault vocabulary turned into signals.

``CrashHost`` SIGKILLs the host's process group, ``CrashProcess`` one process,
``HangHost`` SIGSTOPs the group and SIGCONTs it after ``duration``. ``Preempt`` and
``ScaleDown`` SIGTERM the group and SIGKILL what is left after ``grace``. ``Straggler``
slows the group down for real by duty-cycling it: in every :data:`STRAGGLE_PERIOD` it runs
``1/factor`` of the time and is SIGSTOPped for the rest. Partitions (symmetric, one-way,
isolate, isolate_store, bridge) cut the network for real: the launcher runs such a world
in a network namespace of its own (:mod:`real.netns`) and the injector adds and removes
its drop rules. Faults that need what real mode does not set up (link shaping, a clock
step, restarting a host, reaching into the store or the collectives, changing what a
discovery source reports) are refused before a run starts, never faked.
"""

from __future__ import annotations

import heapq
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from elastic_sim.faults.model import (
    ClockJump,
    ClockSkew,
    CollectiveFault,
    CrashHost,
    CrashProcess,
    CrashRestart,
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    Fault,
    HangHost,
    LinkFault,
    OneWayPartition,
    Partition,
    Preempt,
    ScaleDown,
    ScaleUp,
    StoreCrash,
    StoreFreeze,
    Straggler,
)
from elastic_sim.faults.triggers import Triggered
from elastic_sim.real import netns
from elastic_sim.real.tracefile import TraceFile
from elastic_sim.world import FaultReport, World

INJECTOR = "fault-injector"
"""The ``proc`` of fault events."""


class UnsupportedInRealMode(ValueError):
    """A scheduled fault cannot be injected for real; raised before anything starts."""


SUPPORTED = (CrashHost, CrashProcess, HangHost, Preempt, ScaleDown, Straggler)
"""Fault types real mode injects by signals (partitions: see :func:`why_unsupported`)."""

STRAGGLE_PERIOD = 0.5
"""Seconds of one run/stop cycle of a real straggler."""

_WHY_NOT: tuple[tuple[tuple[type[Fault], ...], str], ...] = (
    ((LinkFault,), "link faults need traffic shaping (tc netem in per-host network "
     "namespaces), which real mode does not set up yet"),
    ((ClockSkew, ClockJump), "clock faults need a per-host clock (time namespaces or "
     "libfaketime), which real mode does not set up yet"),
    ((CrashRestart, ScaleUp), "starting a host's process again during a run is not "
     "supported by the real launcher yet"),
    ((StoreCrash, StoreFreeze), "the store server runs inside a host's process; real mode "
     "cannot crash or freeze it alone"),
    ((CollectiveFault,), "real mode cannot make one Gloo collective fail or hang on purpose"),
    ((DiscoveryAdd, DiscoveryRemove, DiscoveryScriptError, DiscoveryScriptHang),
     "discovery-source faults need the real launcher to rewrite what the protocol's "
     "discovery source reports (an overlay file the processes read), which it does not "
     "do yet"),
    ((Triggered,), "faults triggered by trace events need the injector to follow the "
     "merged trace live, which real mode does not do yet (use a time 'at')"),
)


def why_unsupported(fault: Fault) -> str:
    """Why real mode cannot inject ``fault`` ("" if it can)."""
    if isinstance(fault, SUPPORTED):
        return ""
    if isinstance(fault, Partition | OneWayPartition):
        lacking = netns.missing()
        return (f"partition faults need a real network cut (a network namespace with "
                f"nftables rules) and {lacking}") if lacking else ""
    for types, why in _WHY_NOT:
        if isinstance(fault, types):
            return why
    return f"real mode cannot inject {type(fault).__name__} faults"


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


class Targets(Protocol):
    """What the injector signals: the launcher's view of the run's processes."""

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every process of ``host``; False if none is left."""

    def signal_proc(self, name: str, sig: int) -> str:
        """Signal process ``name``; "" if done, else why not."""

    def cut(self, fault: Partition | OneWayPartition) -> str:
        """Start dropping the packets ``fault`` cuts; "" if done, else why not."""

    def heal(self, fault: Partition | OneWayPartition) -> str:
        """Stop dropping them; "" if done, else why not."""


@dataclass(order=True)
class _Action:
    at: float
    seq: int
    fault: Fault = field(compare=False)
    phase: str = field(compare=False)
    """"start" or "heal"."""


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
        self._queue = [_Action(f.at, i, f, "start") for i, f in enumerate(faults)]
        heapq.heapify(self._queue)
        self._seq = len(faults)
        self._reports = {f.id: FaultReport(id=f.id, type=f.type, fired=False) for f in faults}
        self.host_kills: dict[str, Kill] = {}
        """Hosts crashed, by name."""
        self.proc_kills: dict[str, Kill] = {}
        """Processes crashed, by name."""
        self._done: set[str] = set()
        """Faults healed (a straggler's cycle stops then)."""

    def next_due(self) -> float:
        """Run time of the next action (infinity when none is left)."""
        return self._queue[0].at if self._queue else float("inf")

    def fire_due(self, now: float) -> None:
        """Apply every action due by run time ``now``."""
        while self._queue and self._queue[0].at <= now:
            action = heapq.heappop(self._queue)
            if action.phase == "start":
                self._start(action.fault, now)
            elif action.phase in ("stop", "cont"):
                self._straggle(action, now)
            else:
                self._heal(action.fault, now)

    def _push(self, at: float, fault: Fault, phase: str) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Action(at, self._seq, fault, phase))

    def reports(self, end: float) -> list[FaultReport]:
        """Whether each fault fired; those still pending did not, because the run ended."""
        for action in self._queue:
            report = self._reports[action.fault.id]
            if action.phase == "start" and not report.reason:
                report.reason = f"the run ended at {end:.3f}s, before it was due"
        return list(self._reports.values())

    def _start(self, fault: Fault, now: float) -> None:
        why_not = ""
        if isinstance(fault, CrashHost):
            if self._targets.signal_host(fault.host, signal.SIGKILL):
                self.host_kills[fault.host] = Kill(now, fault.id)
            else:
                why_not = f"host {fault.host}: every process had already exited"
        elif isinstance(fault, CrashProcess):
            why_not = self._targets.signal_proc(fault.proc, signal.SIGKILL)
            if not why_not:
                self.proc_kills[fault.proc] = Kill(now, fault.id)
        elif isinstance(fault, HangHost):
            if self._targets.signal_host(fault.host, signal.SIGSTOP):
                self._push(now + fault.duration, fault, "heal")
            else:
                why_not = f"host {fault.host}: every process had already exited"
        elif isinstance(fault, Preempt | ScaleDown):
            if self._targets.signal_host(fault.host, signal.SIGTERM):
                self._push(now + fault.grace, fault, "heal")
            else:
                why_not = f"host {fault.host}: every process had already exited"
        elif isinstance(fault, Partition | OneWayPartition):
            why_not = self._targets.cut(fault)
            # Loading the rules takes milliseconds: the cut is in force from here on, not
            # from when it was due. (A heal is traced before its rules go: the traced
            # interval is one in which the cut certainly held.)
            now = self._clock()
            if not why_not:
                self._push(now + fault.duration, fault, "heal")
        elif isinstance(fault, Straggler):
            if self._targets.signal_host(fault.host, signal.SIGSTOP):
                self._push(now + STRAGGLE_PERIOD * (1 - 1 / fault.factor), fault, "cont")
                self._push(now + fault.duration, fault, "heal")
            else:
                why_not = f"host {fault.host}: every process had already exited"
        report = self._reports[fault.id]
        report.fired, report.reason = not why_not, why_not
        report.at = None if why_not else now
        self._event(fault, now, "skipped" if why_not else "start", why_not)

    def _straggle(self, action: _Action, now: float) -> None:
        """One half of a straggler's run/stop cycle, until its heal."""
        fault = action.fault
        assert isinstance(fault, Straggler)
        healed_at = fault.at + fault.duration
        if now >= healed_at or self._healed(fault):
            return
        if action.phase == "cont":
            self._targets.signal_host(fault.host, signal.SIGCONT)
            self._push(now + STRAGGLE_PERIOD / fault.factor, fault, "stop")
        elif self._targets.signal_host(fault.host, signal.SIGSTOP):
            self._push(now + STRAGGLE_PERIOD * (1 - 1 / fault.factor), fault, "cont")

    def _healed(self, fault: Fault) -> bool:
        return fault.id in self._done

    def _heal(self, fault: Fault, now: float) -> None:
        self._done.add(fault.id)
        if isinstance(fault, Preempt | ScaleDown):
            if self._targets.signal_host(fault.host, signal.SIGKILL):
                self.host_kills[fault.host] = Kill(now, fault.id)
                self._event(fault, now, "heal", "grace over: SIGKILL to what is left")
            return
        if isinstance(fault, Partition | OneWayPartition):
            self._event(fault, now, "heal", self._targets.heal(fault))
            return
        assert isinstance(fault, HangHost | Straggler)
        if self._targets.signal_host(fault.host, signal.SIGCONT):
            self._event(fault, now, "heal", "")

    def _event(self, fault: Fault, now: float, phase: str, reason: str) -> None:
        target: object = fault.proc if isinstance(fault, CrashProcess) else fault.hosts()[0]
        host = fault.hosts()[0]
        if isinstance(fault, Partition):  # as the sim traces a cut: no one host's event
            target, host = [list(g) for g in fault.groups], "*"
        elif isinstance(fault, OneWayPartition):
            target, host = {"src": list(fault.src), "dst": list(fault.dst)}, "*"
        data = {"id": fault.id, "type": fault.type, "target": target, "phase": phase}
        if reason:
            data["reason"] = reason
        self._trace.event(now, host, INJECTOR, "fault", data)
