"""The simulated runtime: protocols run on virtual time, with injected faults.

:func:`run` is the entry point: ``run(world, faults, seed, emit) -> RunResult``.

Modules (each ``elastic_sim.sim.<name>``): ``kernel`` (virtual time, scheduled callbacks
on simpy, the trace), ``tasks`` (the coroutine driver, futures, waitables), ``clock``,
``network``, ``mailbox``, ``host`` (hosts, processes, signals), ``store``, ``collectives``
(matching, cost, failure of group operations), ``heartbeat`` (NCCL's heartbeat monitor,
wedged GPUs), ``group`` (a member's Group face),
``faults`` (the injector), ``runtime`` (SimRuntime), ``run`` (wiring and :func:`run`).
"""

if __name__ != "elastic_sim.sim":  # `import sim` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.sim; import it by that name "
                      "(a second copy of its modules would not be the same)")

from elastic_sim.sim.run import Simulation, run
from elastic_sim.sim.runtime import SimRuntime

__all__ = ["SimRuntime", "Simulation", "run"]
