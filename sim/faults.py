"""The sim's fault injector for the vocabulary of :mod:`faults.model`.

Each fault fires at its time ``at`` (ties in schedule order), or, wrapped in a
:class:`~faults.triggers.Triggered`, when a trace event matches its trigger (watched from
``at`` on; it fires right after that event, at the same time). It is traced as a ``fault``
event (host: the target host or ``*``; proc ``fault-injector``; data: id, type, target,
phase ``start``/``heal``, or ``skipped`` with a reason; ``trigger`` for a triggered fault).
The event is encoded by :func:`faults.record.fault_event`, the encoder real mode uses too.
A fault whose target is already down does not fire (a ``skipped`` event says why); every
scheduled fault gets a :class:`~world.FaultReport`, read back from those events. Which
handler injects a type is :data:`SIM_HANDLERS` (a :class:`~faults.model.Refusal` says why
the sim cannot).

Discovery-source faults change what :meth:`~protocols.api.Runtime.discovery_overlay`
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
from elastic_sim.protocols.api import SIGNAL_NUMBERS, DiscoveryOverlay
from elastic_sim.sim.collectives import CollectiveEngine
from elastic_sim.sim.host import Cluster, SimHost
from elastic_sim.sim.kernel import Kernel
from elastic_sim.sim.network import Network
from elastic_sim.sim.store import StoreRegistry
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport


class FaultInjector:
    """Fires scheduled faults into a running simulation; what fired is read back from the
    trace (:class:`~faults.record.FaultLedger`)."""

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

    def _crash(self, f: CrashHost) -> None:
        host = self._host(f, f.host)
        if host is not None:
            self._fired(f)
            self.cluster.crash_host(host)

    def _power_off(self, f: PowerOff) -> None:
        host = self._host(f, f.host)
        if host is not None:
            self._fired(f)
            self.cluster.crash_host(host, silent=True)

    def _crash_process(self, f: CrashProcess) -> None:
        hname = f.proc.split("/", 1)[0]
        host = self._host(f, hname)
        if host is None:
            return
        proc = self.cluster.procs.get(f.proc)
        if proc is None:
            self._skip(f, f"process {f.proc} not running")
            return
        self._fired(f)
        self.cluster.kill(proc, -SIGNAL_NUMBERS["KILL"], "killed by SIGKILL")

    def _crash_restart(self, f: CrashRestart) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        self._fired(f)
        host.restarts_pending += 1
        self.cluster.crash_host(host)

        def restart() -> None:
            host.restarts_pending -= 1
            self._trace(f, "heal")
            self.cluster.restart_host(host)
        self._later(f.downtime, restart)

    def _hang(self, f: HangHost) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        self._fired(f)
        self.cluster.pause_host(host)

        def resume() -> None:
            self._trace(f, "heal")
            self.cluster.resume_host(host)
        self._later(f.duration, resume)

    def _wedge(self, f: Wedge) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        procs = [p for name, p in host.procs.items() if not f.proc or name == f.proc]
        stuck = [p for p in procs if any(t.name == f.activity for t in p.tasks.values())]
        if not stuck:
            names = sorted({t.name for p in procs for t in p.tasks.values()})
            self._skip(f, f"no process of {f.proc or host.name} runs activity "
                       f"{f.activity!r} (running: {', '.join(names) or 'none'})")
            return
        self._fired(f)
        for p in stuck:
            p.wedged.setdefault(f.activity, [])

        def unwedge() -> None:
            self._trace(f, "heal")
            for p in stuck:
                held = p.wedged.pop(f.activity, [])
                for task, gen, value, exc in held:
                    self.k.soon(task._resume, gen, value, exc)
        self._later(f.duration, unwedge)

    def _straggler(self, f: Straggler) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        self._fired(f)
        host.slowdown *= f.factor

        def heal() -> None:
            self._trace(f, "heal")
            host.slowdown /= f.factor
        self._later(f.duration, heal)

    def _preempt(self, f: Preempt | ScaleDown) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        if not host.procs:
            self._skip(f, f"no process running on {host.name}")
            return
        self._fired(f)
        for proc in list(host.procs.values()):
            self.cluster.signal(proc, "TERM")

        def kill() -> None:
            if not host.down:
                self._trace(f, "heal", "grace over: SIGKILL to what is left")
                self.cluster.crash_host(host)
        self._later(f.grace, kill)

    def _signal(self, f: Signal) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        agent = f"{host.name}/{self.cluster.world.proc_name}"
        procs = [p for name, p in host.procs.items() if (name == agent) == (f.to == "agent")]
        if not procs:
            self._skip(f, f"no {f.to} process running on {host.name}")
            return
        self._fired(f)
        for proc in procs:
            self.cluster.signal(proc, f.signal)

    def _crash_loop(self, f: CrashLoop) -> None:
        host = self._host(f, f.host, up=False)
        if host is None:
            return
        self._fired(f)
        left = [f.starts]  # starts still to fail (None: all)
        outer = host.start_fault
        agent = self.cluster.world.proc_name

        def doomed(short: str) -> str:
            why = outer(short) if outer is not None else ""
            if why or not f.hits(short == agent) or left[0] == 0:
                return why
            if left[0] is not None:
                left[0] -= 1
            return f"crash loop {f.id}: fails at start-up"
        host.start_fault = doomed

    def _slow_start(self, f: SlowStart) -> None:
        host = self._host(f, f.host, up=False)
        if host is not None:
            self._fired(f)
            host.start_delay += f.delay

    def _scale_up(self, f: ScaleUp) -> None:
        host = self._host(f, f.host, up=False)
        if host is None:
            return
        if host.procs:
            self._skip(f, f"host {host.name} is already running")
            return
        self._fired(f)
        self.cluster.restart_host(host)

    def _partition(self, f: Partition) -> None:
        self._fired(f)
        token = self.net.add_cut(f)
        self._later(f.duration, self._heal_net, f, token)

    def _one_way(self, f: OneWayPartition) -> None:
        self._fired(f)
        token = self.net.add_one_way(f.src, f.dst)
        self._later(f.duration, self._heal_net, f, token)

    def _link(self, f: LinkFault) -> None:
        self._fired(f)
        token = self.net.add_link_fault(f)
        if self.collectives is not None:
            self.collectives.paths_changed()
        self._later(f.duration, self._heal_net, f, token)

    def _conn_reset(self, f: ConnReset) -> None:
        self._fired(f)
        if self.stores is not None:
            for server in list(self.stores.servers.values()):
                server.reset(f.applies)
        if self.collectives is not None:
            self.collectives.reset(f.applies)

    def _heal_net(self, f: Fault, token: int) -> None:
        self._trace(f, "heal")
        self.net.remove_cut(token)
        if isinstance(f, LinkFault) and self.collectives is not None:
            self.collectives.paths_changed()
        self.cluster.notify_resume()

    def _clock_skew(self, f: ClockSkew) -> None:
        host = self._host(f, f.host, up=False)
        if host is None:
            return
        self._fired(f)
        host.clock.jump(f.offset)

        def heal() -> None:
            self._trace(f, "heal")
            host.clock.jump(-f.offset)
        self._later(f.duration, heal)

    def _clock_jump(self, f: ClockJump) -> None:
        host = self._host(f, f.host, up=False)
        if host is not None:
            self._fired(f)
            host.clock.jump(f.delta)

    def _servers(self, f: StoreCrash | StoreFreeze) -> list[Any]:
        servers = [] if self.stores is None else [
            s for s in self.stores.servers.values() if s.host.name == f.host]
        if not servers:
            self._skip(f, f"no store server running on {f.host}")
        return servers

    def _store_crash(self, f: StoreCrash) -> None:
        servers = self._servers(f)
        if servers:
            self._fired(f)
            for s in servers:
                s.die()

    def _store_freeze(self, f: StoreFreeze) -> None:
        servers = self._servers(f)
        if not servers:
            return
        self._fired(f)
        for s in servers:
            s.frozen += 1

        def thaw() -> None:
            self._trace(f, "heal")
            for s in servers:
                s.frozen -= 1
            self.cluster.notify_resume()
        self._later(f.duration, thaw)

    def _collective(self, f: CollectiveFault) -> None:
        host = self._host(f, f.host)
        if host is None or self.collectives is None:
            return
        self._fired(f)
        self.collectives.inject(host.name, f.mode)

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
    """The sim's handler for fault class ``cls`` (:func:`faults.model.handler_for`)."""
    return handler_for(SIM_HANDLERS, cls)


def _protocol(entry: str) -> str:
    """The protocol an entry belongs to (``elastic_sim.protocols.<name>.<module>:fn``), else
    the entry."""
    parts = entry.partition(":")[0].split(".")
    shipped = len(parts) > 3 and parts[:2] == ["elastic_sim", "protocols"]
    return parts[2] if shipped else entry
