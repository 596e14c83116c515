"""``--mode torchrun``: a torchelastic scenario run by upstream itself, one ``torchrun``
agent per host training the bundled worker or the user's ``--script``
(:mod:`elastic_sim.real.torchrun`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from elastic_sim.backends.base import FaultTable, Progress, Refused
from elastic_sim.backends.real import RealBackend, log_line
from elastic_sim.faults.model import CrashLoop, Fault, Refusal, SlowStart, handler_for
from elastic_sim.modes import MODES
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult

if TYPE_CHECKING:
    from elastic_sim.guards import RunGuard
    from elastic_sim.spec import RunSpec

UPSTREAM_STARTS = Refusal(
    "torchrun mode starts workers through upstream's agent, which cannot be made to fail "
    "or slow its starts (the project's own process entry does that); use --mode real")


class TorchrunBackend(RealBackend):
    """Upstream's torchrun agents (torch's launcher, elastic agent and c10d rendezvous),
    the scenario's knobs as their flags, faults through real mode's injector."""

    name: ClassVar[str] = "torchrun"
    summary: ClassVar[str] = MODES["torchrun"].summary
    realism: ClassVar[int] = 2
    launchers: ClassVar[tuple[str, ...]] = ("local", "netns", "slurm", "env")
    takes_script: ClassVar[bool] = MODES["torchrun"].takes_script
    runs_protocols: ClassVar[bool] = False

    def fault_table(self) -> FaultTable:
        """Real mode's table, less the start-up faults upstream's agent cannot meet."""
        return {**super().fault_table(), CrashLoop: UPSTREAM_STARTS, SlowStart: UPSTREAM_STARTS}

    def why_not(self, fault: Fault) -> str:
        """Its own refusals first, then real mode's."""
        handler = handler_for(self.fault_table(), type(fault))
        if isinstance(handler, Refusal):
            return handler.reason
        return super().why_not(fault)

    def rules(self, spec: RunSpec) -> Refused | None:
        """A torchelastic scenario whose knobs torchrun can take, hosts that start
        without delay, and real mode's rules."""
        from elastic_sim.real.torchrun import refusal

        bad = refusal(spec.scenario.protocol.label, spec.scenario.knobs())
        if bad is not None:
            return Refused(spec.file, bad[0], f"{bad[1]}; run with --mode sim")
        for i, h in enumerate(spec.scenario.cluster.host_specs()):
            if h.start_delay > 0:
                return Refused(spec.file, f"cluster.hosts[{i}].start_delay",
                               "torchrun mode starts workers through upstream's agent, which "
                               "cannot delay their start; run with --mode real or --mode sim")
        return super().rules(spec)

    def steps(self, spec: RunSpec, events: Sequence[TraceEvent]) -> int:
        """The scenario's steps; for a user's script that records its steps
        (:mod:`elastic_sim.probe`), its ``--steps N`` argument or the scenario's; for one
        that records none, none (its job is done when torchrun is)."""
        from elastic_sim.real.torchrun import Options, steps

        return steps(Options(script=spec.script), super().steps(spec, events), events)

    def not_judged(self, spec: RunSpec, events: Sequence[TraceEvent]) -> dict[str, str]:
        """What upstream's own events cannot show, and with a user's script what its
        workers did not record."""
        from elastic_sim.real.torchrun import Options, not_judged

        return not_judged(Options(script=spec.script), events)

    def run(self, spec: RunSpec, emit: Callable[[TraceEvent], None], guard: RunGuard,
            workdir: Path, progress: Progress | None = None) -> RunResult:
        """One torchrun agent per host; the trace converted from their own streams."""
        from elastic_sim.real.torchrun import Options
        from elastic_sim.real.torchrun import run as run_torchrun

        if progress:
            progress("starting torchrun agents (importing torch takes a few seconds)")
        return run_torchrun(spec.world, list(spec.faults), spec.seed, workdir / "torchrun",
                            emit, Options(script=spec.script), launch=spec.launch, log=log_line)
