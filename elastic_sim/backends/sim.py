"""``--mode sim``: the deterministic discrete-event simulator (:mod:`elastic_sim.sim`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from elastic_sim.backends.base import Backend, FaultTable, Progress
from elastic_sim.faults.model import Fault
from elastic_sim.modes import MODES
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult

if TYPE_CHECKING:
    from elastic_sim.guards import RunGuard
    from elastic_sim.spec import RunSpec


class SimBackend(Backend):
    """The simulator: virtual time, every fault type, a pure function of (spec, seed)."""

    name: ClassVar[str] = "sim"
    summary: ClassVar[str] = MODES["sim"].summary
    clock: ClassVar[str] = "virtual"
    deterministic: ClassVar[bool] = True
    realism: ClassVar[int] = 0

    def fault_table(self) -> FaultTable:
        """:data:`elastic_sim.sim.faults.SIM_HANDLERS`."""
        from elastic_sim.sim.faults import SIM_HANDLERS

        return SIM_HANDLERS

    def why_not(self, fault: Fault) -> str:
        """Nothing: the sim injects every fault type, also when a trace event triggers it
        (a refusal in its table is traced as a skipped fault when due)."""
        return ""

    def run(self, spec: RunSpec, emit: Callable[[TraceEvent], None], guard: RunGuard,
            workdir: Path, progress: Progress | None = None) -> RunResult:
        """Simulate the spec's world; a watchdog stops even a single endless callback."""
        from elastic_sim import sim
        from elastic_sim.guards import watchdog

        with watchdog(guard):
            return sim.run(spec.world, list(spec.faults), spec.seed, emit, spec.tie_seed, guard)
