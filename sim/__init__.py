"""The simulated runtime: protocols run on virtual time, with injected faults.

:func:`run` is the entry point: ``run(world, faults, seed, emit) -> RunResult``.

Modules: :mod:`sim.kernel` (virtual time, scheduled callbacks on simpy, the trace),
:mod:`sim.tasks` (the coroutine driver, futures, waitables), :mod:`sim.clock`,
:mod:`sim.network`, :mod:`sim.mailbox`, :mod:`sim.host` (hosts, processes, signals),
:mod:`sim.store`, :mod:`sim.collectives` (matching, cost, failure of group operations),
:mod:`sim.group` (a member's Group face), :mod:`sim.faults` (the injector),
:mod:`sim.runtime` (SimRuntime), :mod:`sim.run` (wiring and :func:`run`).
"""

from elastic_sim.sim.run import Simulation, run
from elastic_sim.sim.runtime import SimRuntime

__all__ = ["SimRuntime", "Simulation", "run"]
