"""NCCL's heartbeat monitor, and GPUs that wedge.

torch's ProcessGroupNCCL runs two threads beside the training: a watchdog that polls the
queued collectives and a heartbeat monitor that watches the watchdog (the profile's
``heartbeat_timeout``, ``monitoring`` and ``dump_delay``,
:class:`~elastic_sim.world.CollectiveModel`; upstream's sources: the comment above
:data:`elastic_sim.world.NCCL`). In the sim a process's monitor exists once its first
group on GPUs is created (``nccl_since``).

A ``gpu_wedge`` fault (:class:`~elastic_sim.faults.model.GpuWedge`) wedges a process's GPU
work for good: a kernel that never ends. Its main activity (the training loop, which
drives the GPU) is held, and its calls in its groups never complete and never take part
(its peers time out). As measured on an H200 (``benchmarks/results/README.md``, "NCCL on
a GPU"), its watchdog is not stuck: it only queries the GPU's events, so it keeps beating
and sees its own collective time out, a group timeout after that collective was queued
(the call it is inside, else the one its training loop queues behind the stuck kernel as
the wedge comes: the loop runs ahead of the GPU). It cannot tear the process down (the
abort waits for the kernel, which never ends), so nothing happens then; the watchdog
sends the debug-dump signal ``dump_delay`` later (it first collects the failed
collective's stack trace), and the monitor, on that signal, dumps, waits one
``heartbeat_timeout`` and, with monitoring on, ends the process (SIGABRT,
:data:`~elastic_sim.world.WATCHDOG_ABORT_CODE`): about pg_timeout + 5 s + 480 s after the
wedge at torch's defaults. A process that ends before (a signal, its host lost) is left
alone; a frozen one (hang, SIGSTOP) has its threads frozen too: what fell due happens when
it runs again.

Not modelled: the same signal written to the job's store by a peer whose own collective
timed out (upstream's monitor also takes it, from any rank, within its 1 s poll; the
wedged process's own timeout comes at about the same time); the monitor's periodic check
of the watchdog's beat, which a watchdog stuck inside the blocked abort would fail only
after the dump path has ended the process.

These are the methods of :class:`HeartbeatMonitors`, a mixin of
:class:`~elastic_sim.sim.collectives.CollectiveEngine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from elastic_sim.world import WATCHDOG_ABORT_CODE

if TYPE_CHECKING:
    from elastic_sim.sim.collective_state import GroupState, Member
    from elastic_sim.sim.host import SimProcess
    from elastic_sim.sim.kernel import Kernel
    from elastic_sim.world import CollectiveModel

GPU_ACTIVITY = "main"
"""The activity a wedged GPU holds: every process's entry, the loop that drives its GPU
(the process's other tasks, which touch no GPU, go on)."""


class HeartbeatMonitors:
    """Mixin of :class:`~elastic_sim.sim.collectives.CollectiveEngine`: each process's NCCL
    watchdog and heartbeat monitor as a wedged GPU meets them (what the engine provides is
    declared for the type checker only)."""

    if TYPE_CHECKING:
        k: Kernel
        model: CollectiveModel
        on_gpus: bool
        groups: dict[tuple[int, str], GroupState]
        kill: Callable[[SimProcess, int, str], None] | None

    def _monitors_start(self, g: GroupState) -> None:
        """Group ``g`` was created: on GPUs, each member's process has its NCCL threads from
        now on, unless an earlier group of the process started them."""
        if not self.on_gpus:
            return
        for m in g.members:
            if m is not None and m.proc.nccl_since is None:
                m.proc.nccl_since = self.k.now

    def wedge_gpu(self, proc: SimProcess) -> None:
        """``proc``'s GPU work wedges now, for good (the module docstring says what
        follows)."""
        if proc.gpu_wedged or not proc.alive:
            return
        proc.gpu_wedged = True
        proc.wedged.setdefault(GPU_ACTIVITY, [])
        if proc.nccl_since is None or self.model.heartbeat_timeout <= 0.0:
            return  # no group on GPUs yet, or a backend without a monitor
        mine = self._members_of(proc)
        deadlines = [max(e.t + m.timeout, self.k.now) for m in mine
                     for e in m.pending.values()]
        if deadlines:
            timed_out = min(deadlines)  # the call it is inside
        elif mine:
            timed_out = self.k.now + mine[-1].timeout  # the one queued behind the kernel
        else:
            return  # no live group: nothing queued that could time out
        self.k.call_at(timed_out + self.model.dump_delay, self._dump_signal, proc, timed_out,
                       lane=("monitor", proc.name))

    def _members_of(self, proc: SimProcess) -> list[Member]:
        """``proc``'s live memberships, oldest group first."""
        return [m for g in self.groups.values() for m in g.members
                if m is not None and m.proc is proc and not m.dead and not m.aborted]

    def _dump_signal(self, proc: SimProcess, timed_out: float) -> None:
        """The watchdog, which saw the collective queued behind the wedged kernel time out
        at ``timed_out``, signals the dump: the monitor takes it."""
        if _gone_or_held(proc, self._dump_signal, timed_out):
            return
        abort_at = self.k.now + self.model.heartbeat_timeout if self.model.monitoring else None
        self.k.trace(proc.host.name, proc.name, "nccl_dump_signal",
                     {"timed_out_at": timed_out, "abort_at": abort_at})
        if abort_at is not None:
            self.k.call_at(abort_at, self._monitor_abort, proc, timed_out,
                           lane=("monitor", proc.name))

    def _monitor_abort(self, proc: SimProcess, timed_out: float) -> None:
        """The monitor's wait after the dump is over and the process is still there (its
        teardown blocked by the wedged kernel): it aborts the process."""
        if self.kill is None or _gone_or_held(proc, self._monitor_abort, timed_out):
            return
        self.kill(proc, WATCHDOG_ABORT_CODE,
                  f"the NCCL heartbeat monitor ended the process (SIGABRT) "
                  f"{self.model.heartbeat_timeout:g} s after the debug-dump signal of a "
                  f"collective that timed out at {timed_out:.6g} s behind a wedged GPU "
                  f"kernel (the watchdog's teardown waits for the kernel)")


def _gone_or_held(proc: SimProcess, then: Callable[[SimProcess, float], None],
                  timed_out: float) -> bool:
    """Whether ``proc``'s NCCL threads cannot act now: it has ended (nothing to do), or it
    is frozen (``then`` runs when it runs again)."""
    if not proc.alive:
        return True
    if not proc.runnable:
        proc.defer(then, proc, timed_out)
        return True
    return False
