"""The sim's fault injector for the vocabulary of :mod:`faults.model`.

Each fault fires at its time ``at`` (ties in schedule order), or, wrapped in a
:class:`~faults.triggers.Triggered`, when a trace event matches its trigger (watched from
``at`` on; it fires right after that event, at the same time). It is traced as a ``fault``
event (host: the target host or ``*``; proc ``fault-injector``; data: id, type, target,
phase ``start``/``heal``, or ``skipped`` with a reason; ``trigger`` for a triggered fault).
A fault whose target is already down does not fire; every scheduled fault gets a
:class:`~faults.world.FaultReport`.

Discovery-source faults change what :meth:`~protocols.api.Runtime.discovery_overlay`
returns. They fire only once some process has asked for the overlay (a protocol with a
discovery source): one due earlier waits for that and fires then; in a run where no process
ever asks, they are reported as not fired, because the protocol has no discovery source.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from elastic_sim.faults.discovery import DiscoveryFaults
from elastic_sim.faults.model import (
    FAULT_TYPES_BY_CLASS,
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
from elastic_sim.protocols.api import SIGNAL_NUMBERS, DiscoveryOverlay
from elastic_sim.sim.collectives import CollectiveEngine
from elastic_sim.sim.host import Cluster, SimHost
from elastic_sim.sim.kernel import Kernel
from elastic_sim.sim.network import Network
from elastic_sim.sim.store import StoreRegistry
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport

INJECTOR = "fault-injector"


def fault_type(f: Fault) -> str:
    """The scenario name of ``f``'s type (its class name if it has none)."""
    if isinstance(f, Triggered) and f.fault is not None:
        return fault_type(f.fault)
    return FAULT_TYPES_BY_CLASS.get(type(f), type(f).__name__)


def _target(f: Fault) -> Any:
    if isinstance(f, CrashProcess):
        return f.proc
    if isinstance(f, Partition):
        return [list(g) for g in f.groups]
    if isinstance(f, OneWayPartition):
        return {"src": list(f.src), "dst": list(f.dst)}
    if isinstance(f, LinkFault):
        return [f.a, f.b]
    names = {fl.name for fl in fields(f)}
    return getattr(f, "host") if "host" in names else None  # noqa: B009


class FaultInjector:
    """Fires scheduled faults into a running simulation and reports on each."""

    def __init__(self, kernel: Kernel, cluster: Cluster, network: Network,
                 stores: StoreRegistry | None = None,
                 collectives: CollectiveEngine | None = None, seed: int = 0) -> None:
        self.k = kernel
        self.cluster = cluster
        self.net = network
        self.stores = stores
        self.collectives = collectives
        self.net.rng = random.Random(f"{seed}/links")
        self.reports: list[FaultReport] = []
        self._armed: list[tuple[Triggered, FaultReport]] = []
        self._actions: dict[type[Fault], Callable[[Any, FaultReport], None]] = {
            CrashHost: self._crash, CrashProcess: self._crash_process,
            CrashRestart: self._crash_restart, HangHost: self._hang,
            Straggler: self._straggler, Preempt: self._preempt, ScaleDown: self._preempt,
            ScaleUp: self._scale_up, OneWayPartition: self._one_way, LinkFault: self._link,
            ClockSkew: self._clock_skew, ClockJump: self._clock_jump,
            StoreCrash: self._store_crash, StoreFreeze: self._store_freeze,
            CollectiveFault: self._collective,
            DiscoveryAdd: self._discovery, DiscoveryRemove: self._discovery,
            DiscoveryScriptError: self._discovery, DiscoveryScriptHang: self._discovery,
        }
        self.discovery = DiscoveryFaults()
        self.discovery_read = False
        """Whether a process has asked for the discovery overlay (has a discovery source)."""
        self._discovery_waiting: list[tuple[Fault, FaultReport]] = []
        self._discovery_reports: list[FaultReport] = []

    def schedule(self, faults: Sequence[Fault]) -> None:
        """Schedule every fault at its time, in schedule order for ties."""
        for f in faults:
            rep = FaultReport(id=f.id, type=fault_type(f), fired=False)
            self.reports.append(rep)
            if isinstance(f, Triggered):
                self.k.call_at(f.at, self._arm, f, rep, lane=INJECTOR)
            else:
                self.k.call_at(f.at, self._fire, f, rep, lane=INJECTOR)

    def finish(self, end_time: float) -> list[FaultReport]:
        """The reports, with a reason for every fault that never came to fire."""
        for rep in self.reports:
            if not rep.fired and not rep.reason:
                rep.reason = f"after the run ended (at {end_time:g}s)"
        for f, rep in self._armed:
            if not rep.fired and f.when is not None:
                rep.reason = f"its trigger {f.when.describe()} never happened"
        if not self.discovery_read:
            for rep in self._discovery_reports:
                rep.reason = (f"protocol {_protocol(self.cluster.world.entry)} has no "
                              "discovery source")
        return self.reports

    # -- triggers ----------------------------------------------------------------------

    def _arm(self, f: Triggered, rep: FaultReport) -> None:
        if f.fault is None or f.when is None or self.cluster.finished:
            return
        self._armed.append((f, rep))

    def observe(self, ev: TraceEvent) -> None:
        """See every trace event; pull the triggers it matches (each fires once)."""
        if not self._armed or ev.proc == INJECTOR:
            return
        for f, rep in list(self._armed):
            assert f.when is not None and f.fault is not None
            if f.when.matches(ev.kind, ev.host, ev.data):
                self._armed.remove((f, rep))
                self.k.soon(self._fire, f.fault, rep, f.when.describe())

    # -- firing ------------------------------------------------------------------------

    def _trace(self, f: Fault, host: str, phase: str, reason: str = "",
               extra: Mapping[str, Any] | None = None) -> None:
        data: dict[str, Any] = {"id": f.id, "type": fault_type(f), "target": _target(f)}
        data["phase"] = phase
        if reason:
            data["reason"] = reason
        if extra:
            data.update(extra)
        self.k.trace(host, INJECTOR, "fault", data)

    def _skip(self, f: Fault, rep: FaultReport, host: str, reason: str) -> None:
        rep.reason = reason
        self._trace(f, host, "skipped", reason)

    def _fired(self, f: Fault, rep: FaultReport, host: str) -> None:
        rep.fired = True
        rep.at = self.k.now
        self._trace(f, host, "start", extra={"trigger": rep.reason} if rep.reason else None)
        rep.reason = ""

    def _host(self, f: Fault, rep: FaultReport, name: str, up: bool = True) -> SimHost | None:
        host = self.cluster.hosts.get(name)
        if host is None:
            self._skip(f, rep, name or "*", f"unknown host {name!r}")
            return None
        if up and host.down:
            self._skip(f, rep, name, f"host {name} already down")
            return None
        return host

    def _fire(self, f: Fault, rep: FaultReport, trigger: str = "") -> None:
        if self.cluster.finished:
            return
        rep.reason = trigger  # carried into the start event, then cleared
        if isinstance(f, Partition):
            self._partition(f, rep)
            return
        action = self._actions.get(type(f))
        if action is None:
            self._skip(f, rep, "*", f"fault type {fault_type(f)} is not supported by the sim")
            return
        action(f, rep)

    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        def heal() -> None:
            if not self.cluster.finished:
                fn(*args)
        self.k.call_later(delay, heal)

    def _crash(self, f: CrashHost, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is not None:
            self._fired(f, rep, host.name)
            self.cluster.crash_host(host)

    def _crash_process(self, f: CrashProcess, rep: FaultReport) -> None:
        hname = f.proc.split("/", 1)[0]
        host = self._host(f, rep, hname)
        if host is None:
            return
        proc = self.cluster.procs.get(f.proc)
        if proc is None:
            self._skip(f, rep, hname, f"process {f.proc} not running")
            return
        self._fired(f, rep, hname)
        self.cluster.kill(proc, -SIGNAL_NUMBERS["KILL"], "killed by SIGKILL")

    def _crash_restart(self, f: CrashRestart, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is None:
            return
        self._fired(f, rep, host.name)
        host.restarts_pending += 1
        self.cluster.crash_host(host)

        def restart() -> None:
            host.restarts_pending -= 1
            self._trace(f, host.name, "heal")
            self.cluster.restart_host(host)
        self._later(f.downtime, restart)

    def _hang(self, f: HangHost, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is None:
            return
        self._fired(f, rep, host.name)
        self.cluster.pause_host(host)

        def resume() -> None:
            self._trace(f, host.name, "heal")
            self.cluster.resume_host(host)
        self._later(f.duration, resume)

    def _straggler(self, f: Straggler, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is None:
            return
        self._fired(f, rep, host.name)
        host.slowdown *= f.factor

        def heal() -> None:
            self._trace(f, host.name, "heal")
            host.slowdown /= f.factor
        self._later(f.duration, heal)

    def _preempt(self, f: Preempt | ScaleDown, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is None:
            return
        if not host.procs:
            self._skip(f, rep, host.name, f"no process running on {host.name}")
            return
        self._fired(f, rep, host.name)
        for proc in list(host.procs.values()):
            self.cluster.signal(proc, "TERM")

        def kill() -> None:
            if not host.down:
                self._trace(f, host.name, "heal", "grace over: SIGKILL to what is left")
                self.cluster.crash_host(host)
        self._later(f.grace, kill)

    def _scale_up(self, f: ScaleUp, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host, up=False)
        if host is None:
            return
        if host.procs:
            self._skip(f, rep, host.name, f"host {host.name} is already running")
            return
        self._fired(f, rep, host.name)
        self.cluster.restart_host(host)

    def _partition(self, f: Partition, rep: FaultReport) -> None:
        self._fired(f, rep, "*")
        token = self.net.add_cut(f)
        self._later(f.duration, self._heal_net, f, token)

    def _one_way(self, f: OneWayPartition, rep: FaultReport) -> None:
        self._fired(f, rep, "*")
        token = self.net.add_one_way(f.src, f.dst)
        self._later(f.duration, self._heal_net, f, token)

    def _link(self, f: LinkFault, rep: FaultReport) -> None:
        self._fired(f, rep, "*")
        token = self.net.add_link_fault(f)
        if self.collectives is not None:
            self.collectives.paths_changed()
        self._later(f.duration, self._heal_net, f, token)

    def _heal_net(self, f: Fault, token: int) -> None:
        self._trace(f, "*", "heal")
        self.net.remove_cut(token)
        if isinstance(f, LinkFault) and self.collectives is not None:
            self.collectives.paths_changed()
        self.cluster.notify_resume()

    def _clock_skew(self, f: ClockSkew, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host, up=False)
        if host is None:
            return
        self._fired(f, rep, host.name)
        host.clock.jump(f.offset)

        def heal() -> None:
            self._trace(f, host.name, "heal")
            host.clock.jump(-f.offset)
        self._later(f.duration, heal)

    def _clock_jump(self, f: ClockJump, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host, up=False)
        if host is not None:
            self._fired(f, rep, host.name)
            host.clock.jump(f.delta)

    def _servers(self, f: StoreCrash | StoreFreeze, rep: FaultReport) -> list[Any]:
        servers = [] if self.stores is None else [
            s for s in self.stores.servers.values() if s.host.name == f.host]
        if not servers:
            self._skip(f, rep, f.host, f"no store server running on {f.host}")
        return servers

    def _store_crash(self, f: StoreCrash, rep: FaultReport) -> None:
        servers = self._servers(f, rep)
        if servers:
            self._fired(f, rep, f.host)
            for s in servers:
                s.die()

    def _store_freeze(self, f: StoreFreeze, rep: FaultReport) -> None:
        servers = self._servers(f, rep)
        if not servers:
            return
        self._fired(f, rep, f.host)
        for s in servers:
            s.frozen += 1

        def thaw() -> None:
            self._trace(f, f.host, "heal")
            for s in servers:
                s.frozen -= 1
            self.cluster.notify_resume()
        self._later(f.duration, thaw)

    def _collective(self, f: CollectiveFault, rep: FaultReport) -> None:
        host = self._host(f, rep, f.host)
        if host is None or self.collectives is None:
            return
        self._fired(f, rep, host.name)
        self.collectives.inject(host.name, f.mode)

    # -- discovery source ----------------------------------------------------------------

    def discovery_overlay(self) -> DiscoveryOverlay:
        """The overlay now (see the module docstring); the first call fires the discovery
        faults that were waiting for a discovery source."""
        if not self.discovery_read:
            self.discovery_read = True
            waiting, self._discovery_waiting = self._discovery_waiting, []
            for f, rep in waiting:
                self._discovery_start(f, rep)
        return self.discovery.overlay(self.k.now)

    def _discovery(self, f: Fault, rep: FaultReport) -> None:
        self._discovery_reports.append(rep)
        if not self.discovery_read:
            self._discovery_waiting.append((f, rep))
        else:
            self._discovery_start(f, rep)
        heals = f.heals_at
        if heals is not None:
            self._later(heals - f.at, self._discovery_heal, f, rep)

    def _discovery_start(self, f: Fault, rep: FaultReport) -> None:
        self._fired(f, rep, _discovery_host(f))
        self.discovery.start(f, self.k.now)

    def _discovery_heal(self, f: Fault, rep: FaultReport) -> None:
        if not rep.fired:  # healed while still waiting for a discovery source
            self._discovery_waiting = [(g, r) for g, r in self._discovery_waiting if g is not f]
            rep.reason = "it healed before any process ran a discovery source"
            return
        self._trace(f, _discovery_host(f), "heal")
        self.discovery.heal(f)


def _discovery_host(f: Fault) -> str:
    return f.host if isinstance(f, (DiscoveryAdd, DiscoveryRemove)) else "*"


def _protocol(entry: str) -> str:
    """The protocol an entry belongs to (``elastic_sim.protocols.<name>.<module>:fn``), else
    the entry."""
    parts = entry.partition(":")[0].split(".")
    shipped = len(parts) > 3 and parts[:2] == ["elastic_sim", "protocols"]
    return parts[2] if shipped else entry
