"""The sim's per-fault handlers: how each fault type of :mod:`elastic_sim.faults.model` acts on the
simulated cluster, network, stores and collectives (crash, hang, wedge, gpu_wedge, preempt,
partition, link, clock, store and collective faults).

They are the methods of :class:`FaultHandlers`, a mixin of
:class:`~elastic_sim.sim.faults.FaultInjector`, which schedules and fires them, traces them and
maps each fault type to its handler (:data:`~elastic_sim.sim.faults.SIM_HANDLERS`); the
discovery-source faults stay with the injector (their firing waits for a discovery source).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from elastic_sim.faults.model import (
    ClockJump,
    ClockSkew,
    CollectiveFault,
    ConnReset,
    CrashHost,
    CrashLoop,
    CrashProcess,
    CrashRestart,
    Fault,
    GpuWedge,
    HangHost,
    LinkFault,
    OneWayPartition,
    Partition,
    PowerOff,
    Preempt,
    ScaleDown,
    ScaleUp,
    Signal,
    SlowStart,
    StoreCrash,
    StoreFreeze,
    Straggler,
    Wedge,
)
from elastic_sim.protocols.api import SIGNAL_NUMBERS
from elastic_sim.sim.heartbeat import GPU_ACTIVITY

if TYPE_CHECKING:
    from elastic_sim.sim.collectives import CollectiveEngine
    from elastic_sim.sim.host import Cluster, SimHost
    from elastic_sim.sim.kernel import Kernel
    from elastic_sim.sim.network import Network
    from elastic_sim.sim.store import StoreRegistry


class FaultHandlers:
    """Mixin of :class:`~elastic_sim.sim.faults.FaultInjector`: one handler method per fault type
    (what the injector provides is declared for the type checker only)."""

    if TYPE_CHECKING:
        k: Kernel
        cluster: Cluster
        net: Network
        stores: StoreRegistry | None
        collectives: CollectiveEngine | None

        def _trace(self, f: Fault, phase: str, reason: str = "", host: str | None = None,
                   trigger: str = "") -> None: ...

        def _skip(self, f: Fault, reason: str, host: str | None = None) -> None: ...

        def _fired(self, f: Fault) -> None: ...

        def _host(self, f: Fault, name: str, up: bool = True) -> SimHost | None: ...

        def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None: ...

    def _heal_later(self, f: Fault, delay: float, undo: Callable[..., None], *args: Any,
                    reason: str = "", unless: Callable[[], bool] | None = None) -> None:
        """How every fault that heals ends: ``delay`` seconds from now, unless the run is
        over by then (or ``unless()`` holds then), trace ``f``'s heal (saying ``reason``),
        then undo what it did: ``undo(*args)``."""
        def heal() -> None:
            if unless is None or not unless():
                self._trace(f, "heal", reason)
                undo(*args)
        self._later(delay, heal)

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
            self.cluster.restart_host(host)
        self._heal_later(f, f.downtime, restart)

    def _hang(self, f: HangHost) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        self._fired(f)
        self.cluster.pause_host(host)
        self._heal_later(f, f.duration, self.cluster.resume_host, host)

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
            for p in stuck:
                if p.gpu_wedged and f.activity == GPU_ACTIVITY:
                    continue  # its GPU holds it still
                held = p.wedged.pop(f.activity, [])
                for task, gen, value, exc in held:
                    self.k.soon(task._resume, gen, value, exc)
        self._heal_later(f, f.duration, unwedge)

    def _gpu_wedge(self, f: GpuWedge) -> None:
        host = self._host(f, f.host)
        if host is None or self.collectives is None:
            return
        procs = [p for name, p in host.procs.items()
                 if (not f.proc or name == f.proc) and p.nccl_since is not None]
        if not procs:
            self._skip(f, f"no process of {f.proc or host.name} has a process group on GPUs "
                       "(cluster.device: cuda) yet")
            return
        self._fired(f)
        for p in procs:
            self.collectives.wedge_gpu(p)

    def _straggler(self, f: Straggler) -> None:
        host = self._host(f, f.host)
        if host is None:
            return
        self._fired(f)
        host.slowdown *= f.factor

        def recover() -> None:
            host.slowdown /= f.factor
        self._heal_later(f, f.duration, recover)

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
        self._heal_later(f, f.grace, self.cluster.crash_host, host,
                         reason="grace over: SIGKILL to what is left", unless=lambda: host.down)

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
        self._heal_later(f, f.duration, self._undo_net, f, token)

    def _one_way(self, f: OneWayPartition) -> None:
        self._fired(f)
        token = self.net.add_one_way(f.src, f.dst)
        self._heal_later(f, f.duration, self._undo_net, f, token)

    def _link(self, f: LinkFault) -> None:
        self._fired(f)
        token = self.net.add_link_fault(f)
        if self.collectives is not None:
            self.collectives.paths_changed()
        self._heal_later(f, f.duration, self._undo_net, f, token)

    def _conn_reset(self, f: ConnReset) -> None:
        self._fired(f)
        if self.stores is not None:
            for server in list(self.stores.servers.values()):
                server.reset(f.applies)
        if self.collectives is not None:
            self.collectives.reset(f.applies)
        for proc in list(self.cluster.procs.values()):  # protocols' own connections
            if proc.conn_reset is not None and proc.alive:
                proc.conn_reset(_peers_reset(f, proc.host.name))

    def _undo_net(self, f: Fault, token: int) -> None:
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
        self._heal_later(f, f.duration, host.clock.jump, -f.offset)

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
            for s in servers:
                s.frozen -= 1
            self.cluster.notify_resume()
        self._heal_later(f, f.duration, thaw)

    def _collective(self, f: CollectiveFault) -> None:
        host = self._host(f, f.host)
        if host is None or self.collectives is None:
            return
        self._fired(f)
        self.collectives.inject(host.name, f.mode)


def _peers_reset(f: ConnReset, here: str) -> Callable[[str], bool]:
    """Whether ``f`` resets the connections between host ``here`` and a peer host (never a
    host's loopback)."""
    def hit(peer: str) -> bool:
        return peer != here and f.applies(here, peer)
    return hit
