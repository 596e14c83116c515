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
    from elastic_sim.crawl import CrawlWatch
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
        """Simulate the spec's world; a watchdog stops even a single endless callback.
        Run from the command line (``progress``), a run that crawls says why, once
        (:mod:`elastic_sim.crawl`)."""
        from elastic_sim import sim
        from elastic_sim.guards import watchdog

        kernel_guard: Callable[[], tuple[str, str] | None] = guard
        if progress is not None:
            watch = _crawl_watch(spec, guard)
            emit, kernel_guard = watch.seen(emit), watch
        with watchdog(guard):
            return sim.run(spec.world, list(spec.faults), spec.seed, emit, spec.tie_seed,
                           kernel_guard)


def _crawl_watch(spec: RunSpec, guard: RunGuard) -> CrawlWatch:
    """The guard that also tells when ``spec``'s run crawls, and which knob makes it."""
    import sys

    from elastic_sim.crawl import CrawlWatch, knob_defaults, suspects
    from elastic_sim.protocols.static.settings import Workload

    sc = spec.scenario
    culprits = suspects(dict(sc.protocol.knobs), knob_defaults(sc.protocol_info().knobs),
                        sc.workload.step_time, Workload.step_time)
    return CrawlWatch(guard, len(spec.world.hosts), culprits,
                      lambda line: print(line, file=sys.stderr, flush=True))
