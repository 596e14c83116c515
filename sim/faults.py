"""The sim's fault injector for the vocabulary of :mod:`faults.model`.

Each fault fires at its time ``at`` (ties in schedule order) and is traced as a ``fault``
event (host: the target host or ``*``; proc ``fault-injector``; data: id, type, target,
phase ``start``/``heal``, or ``skipped`` with a reason). A fault whose target is already
down does not fire; every scheduled fault gets a :class:`~faults.world.FaultReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faults.model import FAULT_TYPES_BY_CLASS, CrashHost, CrashProcess, Fault, HangHost, Partition
from faults.world import FaultReport
from sim.host import Cluster, SimHost
from sim.kernel import Kernel
from sim.network import Network

INJECTOR = "fault-injector"


def fault_type(f: Fault) -> str:
    """The scenario name of ``f``'s type (its class name if it has none)."""
    return FAULT_TYPES_BY_CLASS.get(type(f), type(f).__name__)


def _target(f: Fault) -> Any:
    if isinstance(f, (CrashHost, HangHost)):
        return f.host
    if isinstance(f, CrashProcess):
        return f.proc
    if isinstance(f, Partition):
        return [list(g) for g in f.groups]
    return None


class FaultInjector:
    """Fires scheduled faults into a running simulation and reports on each."""

    def __init__(self, kernel: Kernel, cluster: Cluster, network: Network) -> None:
        self.k = kernel
        self.cluster = cluster
        self.net = network
        self.reports: list[FaultReport] = []

    def schedule(self, faults: Sequence[Fault]) -> None:
        """Schedule every fault at its time, in schedule order for ties."""
        for f in faults:
            rep = FaultReport(id=f.id, type=fault_type(f), fired=False)
            self.reports.append(rep)
            self.k.call_at(f.at, self._fire, f, rep)

    def finish(self, end_time: float) -> list[FaultReport]:
        """The reports, with a reason for every fault that never came to fire."""
        for rep in self.reports:
            if not rep.fired and not rep.reason:
                rep.reason = f"after the run ended (at {end_time:g}s)"
        return self.reports

    # -- firing ------------------------------------------------------------------------

    def _trace(self, f: Fault, host: str, phase: str, reason: str = "") -> None:
        data: dict[str, Any] = {"id": f.id, "type": fault_type(f), "target": _target(f)}
        data["phase"] = phase
        if reason:
            data["reason"] = reason
        self.k.trace(host, INJECTOR, "fault", data)

    def _skip(self, f: Fault, rep: FaultReport, host: str, reason: str) -> None:
        rep.reason = reason
        self._trace(f, host, "skipped", reason)

    def _fired(self, f: Fault, rep: FaultReport, host: str) -> None:
        rep.fired = True
        rep.at = self.k.now
        self._trace(f, host, "start")

    def _host(self, f: Fault, rep: FaultReport, name: str) -> SimHost | None:
        host = self.cluster.hosts.get(name)
        if host is None:
            self._skip(f, rep, name or "*", f"unknown host {name!r}")
            return None
        if host.down:
            self._skip(f, rep, name, f"host {name} already down")
            return None
        return host

    def _fire(self, f: Fault, rep: FaultReport) -> None:
        if self.cluster.finished:
            return
        if isinstance(f, CrashHost):
            host = self._host(f, rep, f.host)
            if host is not None:
                self._fired(f, rep, host.name)
                self.cluster.crash_host(host)
        elif isinstance(f, CrashProcess):
            hname = f.proc.split("/", 1)[0]
            host = self._host(f, rep, hname)
            if host is None:
                return
            proc = self.cluster.procs.get(f.proc)
            if proc is None:
                self._skip(f, rep, hname, f"process {f.proc} not running")
                return
            self._fired(f, rep, hname)
            self.cluster.kill(proc, -9, "killed by SIGKILL")
        elif isinstance(f, HangHost):
            host = self._host(f, rep, f.host)
            if host is not None:
                self._fired(f, rep, host.name)
                self.cluster.pause_host(host)
                self.k.call_later(f.duration, self._heal_hang, f, host)
        elif isinstance(f, Partition):
            self._fired(f, rep, "*")
            token = self.net.add_cut(f)
            self.k.call_later(f.duration, self._heal_partition, f, token)
        else:
            self._skip(f, rep, "*", f"fault type {fault_type(f)} is not supported by the sim")

    def _heal_hang(self, f: HangHost, host: SimHost) -> None:
        if self.cluster.finished:
            return
        self._trace(f, host.name, "heal")
        self.cluster.resume_host(host)

    def _heal_partition(self, f: Partition, token: int) -> None:
        if self.cluster.finished:
            return
        self._trace(f, "*", "heal")
        self.net.remove_cut(token)
        self.cluster.notify_resume()
