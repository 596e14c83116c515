"""The sim's fault injector for the vocabulary of :mod:`elastic_sim.faults.model`.

Each fault fires at its time ``at`` (ties in schedule order), or, wrapped in a
:class:`~elastic_sim.faults.triggers.Triggered`, when a trace event matches its trigger (watched
from ``at`` on; it fires right after that event, at the same time). It is traced as a ``fault``
event (host: the target host or ``*``; proc ``fault-injector``; data: id, type, target,
phase ``start``/``heal``, or ``skipped`` with a reason; ``trigger`` for a triggered fault).
The event is encoded by :func:`elastic_sim.faults.record.fault_event`, the encoder real mode uses
too. A fault whose target is already down does not fire (a ``skipped`` event says why); every
scheduled fault gets a :class:`~world.FaultReport`, read back from those events. Which
handler injects a type is :data:`SIM_HANDLERS` (a :class:`~elastic_sim.faults.model.Refusal` says
why the sim cannot).
The per-type handlers (all but the discovery-source faults') are the methods of
:class:`~elastic_sim.sim.fault_handlers.FaultHandlers`, a mixin of :class:`FaultInjector`.

Discovery-source faults change what :meth:`~elastic_sim.protocols.api.Runtime.discovery_overlay`
returns. They fire only once some process has asked for the overlay (a protocol with a
discovery source): one due earlier waits for that and fires then; in a run where no process
ever asks, they are reported as not fired, because the protocol has no discovery source.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from elastic_sim.faults.discovery import DiscoveryFaults
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
from elastic_sim.protocols.api import DiscoveryOverlay
from elastic_sim.sim.collectives import CollectiveEngine
from elastic_sim.sim.fault_handlers import FaultHandlers
from elastic_sim.sim.host import Cluster, SimHost
from elastic_sim.sim.kernel import Kernel
from elastic_sim.sim.network import Network
from elastic_sim.sim.store import StoreRegistry
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport


class FaultInjector(FaultHandlers):
    """Fires scheduled faults into a running simulation; what fired is read back from the
    trace (:class:`~elastic_sim.faults.record.FaultLedger`)."""

    def __init__(self, kernel: Kernel, cluster: Cluster, network: Network,
                 stores: StoreRegistry | None = None,
                 collectives: CollectiveEngine | None = None, seed: int = 0) -> None:
        self.k = kernel
        self.cluster = cluster
        self.net = network
        self.stores = stores
        self.collectives = collectives
        self.net.rng = random.Random(f"{seed}/links")
        self.scheduled: list[Fault] = []
        self.ledger = FaultLedger()
        self._armed: list[Triggered] = []
        self._trigger = ""
        """The trigger of the fault being fired ("" when timed), for its start event."""
        self.discovery = DiscoveryFaults()
        self.discovery_read = False
        """Whether a process has asked for the discovery overlay (has a discovery source)."""
        self._discovery_waiting: list[tuple[Fault, str]] = []
        self._discovery_healed: list[Fault] = []
        """Discovery faults that healed while waiting for a discovery source."""

    def schedule(self, faults: Sequence[Fault]) -> None:
        """Schedule every fault at its time, in schedule order for ties."""
        for f in faults:
            self.scheduled.append(f)
            if isinstance(f, Triggered):
                self.k.call_at(f.at, self._arm, f, lane=INJECTOR)
            else:
                self.k.call_at(f.at, self._fire, f, lane=INJECTOR)

    def finish(self, end_time: float) -> list[FaultReport]:
        """Trace why discovery faults still waiting never fired (no discovery source), then
        the report on every scheduled fault, read from the trace."""
        if not self.discovery_read:
            never = [f for f, _ in self._discovery_waiting] + self._discovery_healed
            self._discovery_waiting, self._discovery_healed = [], []
            for f in never:
                self._skip(f, f"protocol {_protocol(self.cluster.world.entry)} has no "
                           "discovery source")
        return self.ledger.reports(self.scheduled, end_time)

    # -- triggers ----------------------------------------------------------------------

    def _arm(self, f: Triggered) -> None:
        if f.fault is None or f.when is None or self.cluster.finished:
            return
        self.cluster.touch()  # the trigger may watch steps: no stretch hides them
        self._armed.append(f)

    def observe(self, ev: TraceEvent) -> None:
        """See every trace event: record fault events, pull the triggers it matches (each
        fires once)."""
        if ev.proc == INJECTOR:
            self.ledger.observe(ev)
            return
        if not self._armed:
            return
        for f in list(self._armed):
            assert f.when is not None and f.fault is not None
            if f.when.matches(ev.kind, ev.host, ev.data):
                self._armed.remove(f)
                self.k.soon(self._fire, f.fault, f.when.describe())

    # -- firing ------------------------------------------------------------------------

    def _trace(self, f: Fault, phase: str, reason: str = "", host: str | None = None,
               trigger: str = "") -> None:
        where, data = fault_event(f, phase, reason, {"trigger": trigger} if trigger else None)
        self.k.trace(where if host is None else host, INJECTOR, "fault", data)

    def _skip(self, f: Fault, reason: str, host: str | None = None) -> None:
        self._trace(f, "skipped", reason, host)

    def _fired(self, f: Fault) -> None:
        self._trace(f, "start", trigger=self._trigger)

    def _host(self, f: Fault, name: str, up: bool = True) -> SimHost | None:
        host = self.cluster.hosts.get(name)
        if host is None:
            self._skip(f, f"unknown host {name!r}", name or "*")
            return None
        if up and host.down:
            self._skip(f, f"host {name} already down", name)
            return None
        return host

    def triggers_armed(self) -> bool:
        """Whether a fault trigger waits for a trace event (that a step may be)."""
        return bool(self._armed)

    def _fire(self, f: Fault, trigger: str = "") -> None:
        if self.cluster.finished:
            return
        self.cluster.touch()
        handler = sim_handler(type(f))
        if handler is None or isinstance(handler, Refusal):
            why = handler.reason if handler else f"fault type {f.type} has no sim handler"
            self._skip(f, why)
            return
        self._trigger = trigger
        try:
            handler(self, f)
        finally:
            self._trigger = ""

    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        def heal() -> None:
            if not self.cluster.finished:
                self.cluster.touch()
                fn(*args)
        self.k.call_later(delay, heal)

    # -- discovery source ----------------------------------------------------------------

    def discovery_overlay(self) -> DiscoveryOverlay:
        """The overlay now (see the module docstring); the first call fires the discovery
        faults that were waiting for a discovery source."""
        if not self.discovery_read:
            self.discovery_read = True
            waiting, self._discovery_waiting = self._discovery_waiting, []
            for f, trigger in waiting:
                self._trigger = trigger
                self._discovery_start(f)
            self._trigger = ""
            healed, self._discovery_healed = self._discovery_healed, []
            for f in healed:
                self._skip(f, "it healed before any process ran a discovery source")
        return self.discovery.overlay(self.k.now)

    def _discovery(self, f: Fault) -> None:
        if not self.discovery_read:
            self._discovery_waiting.append((f, self._trigger))
        else:
            self._discovery_start(f)
        heals = f.heals_at
        if heals is not None:
            self._later(heals - f.at, self._discovery_heal, f)

    def _discovery_start(self, f: Fault) -> None:
        self._fired(f)
        self.discovery.start(f, self.k.now)

    def _discovery_heal(self, f: Fault) -> None:
        if not self.ledger.fired(f.id):  # healed while still waiting for a discovery source
            self._discovery_waiting = [(g, t) for g, t in self._discovery_waiting if g is not f]
            self._discovery_healed.append(f)
            return
        self._trace(f, "heal")
        self.discovery.heal(f)


SimHandler = Callable[[FaultInjector, Any], None]

SIM_HANDLERS: dict[type[Fault], SimHandler | Refusal] = {
    CrashHost: FaultInjector._crash,
    CrashProcess: FaultInjector._crash_process,
    PowerOff: FaultInjector._power_off,
    CrashRestart: FaultInjector._crash_restart,
    HangHost: FaultInjector._hang,
    Straggler: FaultInjector._straggler,
    Wedge: FaultInjector._wedge,
    GpuWedge: FaultInjector._gpu_wedge,
    Preempt: FaultInjector._preempt,
    ScaleDown: FaultInjector._preempt,
    ScaleUp: FaultInjector._scale_up,
    Signal: FaultInjector._signal,
    CrashLoop: FaultInjector._crash_loop,
    SlowStart: FaultInjector._slow_start,
    Partition: FaultInjector._partition,
    OneWayPartition: FaultInjector._one_way,
    LinkFault: FaultInjector._link,
    ConnReset: FaultInjector._conn_reset,
    ClockSkew: FaultInjector._clock_skew,
    ClockJump: FaultInjector._clock_jump,
    StoreCrash: FaultInjector._store_crash,
    StoreFreeze: FaultInjector._store_freeze,
    CollectiveFault: FaultInjector._collective,
    DiscoveryAdd: FaultInjector._discovery,
    DiscoveryRemove: FaultInjector._discovery,
    DiscoveryScriptError: FaultInjector._discovery,
    DiscoveryScriptHang: FaultInjector._discovery,
}
"""The sim's handler for every fault type (a refusal says why it cannot inject one).
Subclasses of a type with a handler (isolate, isolate_store, bridge: partitions) share it
through :func:`sim_handler`."""


def sim_handler(cls: type[Fault]) -> SimHandler | Refusal | None:
    """The sim's handler for fault class ``cls`` (:func:`elastic_sim.faults.model.handler_for`)."""
    return handler_for(SIM_HANDLERS, cls)


def _protocol(entry: str) -> str:
    """The protocol an entry belongs to (``elastic_sim.protocols.<name>.<module>:fn``), else
    the entry."""
    parts = entry.partition(":")[0].split(".")
    shipped = len(parts) > 3 and parts[:2] == ["elastic_sim", "protocols"]
    return parts[2] if shipped else entry
