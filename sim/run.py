"""One simulated run: wire the kernel, network, hosts, stores, groups and faults; run to the
end or to the time limit; report.

A run is a pure function of (world, faults, seed): every random choice comes from a named
sub-stream of the seed (``random.Random(f"{seed}/{name}")``; str seeds are hashed with
sha512, so streams are stable across processes), ties in time are broken by scheduling
order (or, with a tie seed, by a seeded order between lanes: :mod:`elastic_sim.sim.kernel`), and
nothing iterates a set or depends on the wall clock.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.protocols.api import JSON, Runtime
from elastic_sim.sim.collectives import CollectiveEngine
from elastic_sim.sim.faults import FaultInjector
from elastic_sim.sim.host import Cluster, SimProcess
from elastic_sim.sim.kernel import Guard, Kernel, livelock_threshold
from elastic_sim.sim.network import Network
from elastic_sim.sim.runtime import SimRuntime
from elastic_sim.sim.store import SERVICE_TIME, StoreRegistry
from elastic_sim.sim.stretch import StretchBook
from elastic_sim.sim.ticks import TickBook
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World


class Simulation:
    """Everything of one run, wired together."""

    def __init__(
        self,
        world: World,
        seed: int,
        emit: Callable[[TraceEvent], None],
        store_service_time: float = SERVICE_TIME,
        tie_seed: int | None = None,
        guard: Guard | None = None,
    ) -> None:
        if world.time_limit <= 0:
            raise ValueError("world.time_limit must be positive")
        self.world = world
        self.seed = seed
        self.memos: dict[str, Any] = {}
        """The objects the run's processes share (:meth:`SimRuntime.shared`)."""
        self._emit = emit
        self.kernel = Kernel(self._trace, tie_seed)
        self.kernel.livelock_calls = livelock_threshold(len(world.hosts))
        self.kernel.guard = guard
        self.network = Network(world)
        self.cluster = Cluster(self.kernel, world, self._make_runtime)
        self.stores = StoreRegistry(self.kernel, self.network, store_service_time)
        self.collectives = CollectiveEngine(self.kernel, self.network, world.collectives, seed)
        self.collectives.on_gpus = world.device == "cuda"
        self.injector = FaultInjector(self.kernel, self.cluster, self.network, self.stores,
                                      self.collectives, seed)
        self.cluster.resume_listeners += [self.stores.retry_all, self.collectives.recheck]
        book = StretchBook(self.kernel, self.collectives, world.wake_latency,
                           world.fidelity == "fast" and tie_seed is None,
                           self.injector.triggers_armed)
        self.collectives.stretches = book
        self.collectives.kill = self.cluster.kill
        self.stretches = book
        self.cluster.touch_listeners.append(book.split_all)
        self.ticks = TickBook()
        """The polled waits that skip ticks (fast fidelity, :mod:`elastic_sim.sim.ticks`)."""
        self.cluster.touch_listeners.append(self.ticks.poke_all)
        self.cluster.exit_listeners.append(self.ticks.poke_all)

    def _trace(self, ev: TraceEvent) -> None:
        self._emit(ev)
        self.injector.observe(ev)  # event triggers of faults

    def _make_runtime(self, proc: SimProcess) -> Runtime:
        return SimRuntime(self, proc)

    def run(self, faults: Sequence[Fault]) -> RunResult:
        """Run to the end (every process exited) or to the time limit."""
        self.kernel.stop_after(self.world.time_limit)
        self.injector.schedule(faults)
        self.cluster.schedule_starts()
        try:
            self.kernel.run()
            self.stretches.finish()
            stop = self.kernel.stopped
            if stop is not None:
                data: dict[str, JSON] = {"reason": stop.kind, "message": stop.message}
                if stop.spinning:
                    data["spinning"] = dict(stop.spinning)
                self.kernel.trace("*", "elastic-sim", "run_stopped", data)
            hung = stop is not None or not self.cluster.finished
            end = self.kernel.now if stop is not None or not hung else self.world.time_limit
            reports = self.injector.finish(end)  # may trace why a fault never fired
        finally:
            self.kernel.closed = True
            self.cluster.close()
        return RunResult(
            exit_codes=dict(self.cluster.exit_codes),
            end_time=end,
            hung=hung,
            faults=reports,
            trace_events=self.kernel.events,
            stopped="" if stop is None else stop.kind,
        )


def run(
    world: World, faults: Sequence[Fault], seed: int, emit: Callable[[TraceEvent], None],
    tie_seed: int | None = None, guard: Guard | None = None,
) -> RunResult:
    """Run ``world`` with ``faults`` in virtual time; call ``emit`` for every trace event,
    in the order they happen. The same (world, faults, seed) gives the same events.
    ``tie_seed`` (None: scheduling order) shuffles the order of same-time events of
    different lanes (:mod:`elastic_sim.sim.kernel`); the same (world, faults, seed, tie_seed) gives
    the same events. ``guard`` is asked now and then whether to stop (a wall-clock or memory
    limit: (kind, message)); a busy loop at one instant of virtual time stops the run too
    (:data:`elastic_sim.sim.kernel.LIVELOCK_CALLS`). Either way the run ends at once with a
    ``run_stopped`` event, ``hung=True`` and ``stopped`` saying why.

    The run ends when every process has exited and no host is still to start
    (``hung=False``, ``end_time`` = the last exit), or at ``world.time_limit``
    (``hung=True``; processes still running then have no exit code). ``trace_sha256`` is
    left empty: whoever writes the events (a :class:`~elastic_sim.protocols.trace.TraceWriter`) has
    it.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many short-lived objects, few cycles: about 2x faster (calibration.md)
    try:
        return Simulation(world, seed, emit, tie_seed=tie_seed, guard=guard).run(faults)
    finally:
        if gc_was_enabled:
            gc.enable()
