"""NCCL's heartbeat monitor, and GPUs that wedge.

torch's ProcessGroupNCCL runs two threads beside the training: a watchdog that polls the
queued collectives, beating a counter on each pass, and a heartbeat monitor that reads
that counter (the profile's ``heartbeat_timeout`` and ``monitoring``,
:class:`~elastic_sim.world.CollectiveModel`; upstream's sources: the comment above
:data:`elastic_sim.world.NCCL`). In the sim a process's monitor starts when its first group
on GPUs is created, at ``since``, and checks the beat at ``since + k * heartbeat_timeout``,
k >= 1.

A ``gpu_wedge`` fault (:class:`~elastic_sim.faults.model.GpuWedge`) wedges a process's GPU
work for good: its main activity (the training loop, which drives the GPU) is held, its
calls in its groups never return and never take part (its peers time out), and its
watchdog stops beating, so it sees no timeout and tears nothing down. The check after the
first check made at or after the wedge finds the beat unchanged (:func:`last_moving_check`):
the monitor traces ``nccl_watchdog_stuck`` and, with monitoring on, aborts the process one
``heartbeat_timeout`` later (its confirmation sleep; SIGABRT,
:data:`~elastic_sim.world.WATCHDOG_ABORT_CODE`). A process that ends before (a signal, its
host lost) is left alone; a frozen one (hang, SIGSTOP) has its monitor frozen too: what
fell due happens when it runs again.

These are the methods of :class:`HeartbeatMonitors`, a mixin of
:class:`~elastic_sim.sim.collectives.CollectiveEngine`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from elastic_sim.world import WATCHDOG_ABORT_CODE

if TYPE_CHECKING:
    from elastic_sim.sim.collective_state import GroupState
    from elastic_sim.sim.host import SimProcess
    from elastic_sim.sim.kernel import Kernel
    from elastic_sim.world import CollectiveModel

GPU_ACTIVITY = "main"
"""The activity a wedged GPU holds: every process's entry, the loop that drives its GPU
(the process's other tasks, which touch no GPU, go on)."""


def last_moving_check(since: float, stuck_at: float, period: float) -> float:
    """The last check at which a monitor checking at ``since + k * period`` (k >= 1) sees
    the beat of a watchdog stuck from ``stuck_at`` moved: its first check made at or after
    ``stuck_at`` (the first check always sees the beat moved from the monitor's start). The
    next check, one ``period`` later, finds it stuck: between ``stuck_at + period`` and
    ``stuck_at + 2 * period``."""
    k = max(1, math.ceil((stuck_at - since) / period))
    # the division rounds: settle k on the instants as the checks are computed
    while k > 1 and since + (k - 1) * period >= stuck_at:
        k -= 1
    while since + k * period < stuck_at:
        k += 1
    return since + k * period


class HeartbeatMonitors:
    """Mixin of :class:`~elastic_sim.sim.collectives.CollectiveEngine`: each process's NCCL
    heartbeat monitor, and wedging a process's GPU (what the engine provides is declared
    for the type checker only)."""

    if TYPE_CHECKING:
        k: Kernel
        model: CollectiveModel
        on_gpus: bool
        kill: Callable[[SimProcess, int, str], None] | None

    def _monitors_start(self, g: GroupState) -> None:
        """Group ``g`` was created: on GPUs, the monitor of each member's process starts
        now, unless an earlier group of the process started it."""
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
        period = self.model.heartbeat_timeout
        if proc.nccl_since is None or period <= 0.0:
            return  # no group on GPUs yet, or a backend without a monitor
        moved = last_moving_check(proc.nccl_since, self.k.now, period)
        self.k.call_at(moved + period, self._watchdog_stuck, proc, moved,
                       lane=("monitor", proc.name))

    def _watchdog_stuck(self, proc: SimProcess, moved: float) -> None:
        """The monitor's check finds the beat where it was at the check at ``moved``."""
        if not proc.alive:
            return
        if not proc.runnable:
            proc.defer(self._watchdog_stuck, proc, moved)
            return
        abort_at = self.k.now + self.model.heartbeat_timeout if self.model.monitoring else None
        self.k.trace(proc.host.name, proc.name, "nccl_watchdog_stuck",
                     {"since": moved, "abort_at": abort_at})
        if abort_at is not None:
            self.k.call_at(abort_at, self._monitor_abort, proc, moved,
                           lane=("monitor", proc.name))

    def _monitor_abort(self, proc: SimProcess, moved: float) -> None:
        """The confirmation sleep is over: the monitor aborts the process."""
        if not proc.alive or self.kill is None:
            return
        if not proc.runnable:
            proc.defer(self._monitor_abort, proc, moved)
            return
        self.kill(proc, WATCHDOG_ABORT_CODE,
                  f"the NCCL heartbeat monitor found the watchdog stuck (its beat had not "
                  f"moved since {moved:.6g} s) and aborted the process (SIGABRT)")
