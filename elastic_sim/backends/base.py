"""What every backend is: a name, what it refuses, how it builds a run's world and how it
runs a spec. :mod:`elastic_sim.backends` registers them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import Fault, Refusal, handler_for
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

if TYPE_CHECKING:
    from elastic_sim.guards import RunGuard
    from elastic_sim.scenario import Scenario
    from elastic_sim.spec import RunSpec

Progress = Callable[[str], None]
"""Where a run reports what it is doing (a status line)."""
FaultTable = Mapping[type[Fault], Any]
"""A runtime's handler for every fault type, or the :class:`~elastic_sim.faults.model.Refusal`
saying why it cannot inject it."""


class Refused(ScenarioError):
    """A backend cannot run this spec: raised when the spec is compiled, before anything
    starts (exit 2), naming the scenario field at fault."""


class Backend:
    """One way to run a spec. Subclasses set the class attributes and :meth:`run`; the
    defaults describe a runtime on wall-clock time that runs hosts on this machine."""

    name: ClassVar[str] = ""
    """The ``--mode`` that picks it."""
    summary: ClassVar[str] = ""
    """One line for ``--help``."""
    clock: ClassVar[str] = "wall-clock"
    """What its run times are: ``virtual`` (simulated) or ``wall-clock`` (measured)."""
    deterministic: ClassVar[bool] = False
    """The same spec gives the same trace: its runs may go in parallel with others, and a
    scenario's ``tie_seed`` (the order of same-time events) applies. Otherwise its runs are
    timed and go one at a time in a campaign."""
    realism: ClassVar[int] = 1
    """How close to production it runs: ``compare`` takes the most real mode it runs as
    the reference the others are judged against."""
    launchers: ClassVar[tuple[str, ...]] = ("local",)
    """Where it can place hosts (``--launcher``): ``local`` is this machine."""
    takes_script: ClassVar[bool] = False
    """Whether it runs a user's training script (``--script``) instead of the bundled
    worker."""
    runs_protocols: ClassVar[bool] = True
    """Whether it runs the project's protocol code against :mod:`elastic_sim.protocols.api`
    (the contract suite then holds it to the seam); upstream's own code does not."""

    def fault_table(self) -> FaultTable:
        """Its handler (or refusal) for every fault type."""
        raise NotImplementedError

    def why_not(self, fault: Fault) -> str:
        """Why it cannot inject ``fault`` ("" when it can): its table's refusal."""
        handler = handler_for(self.fault_table(), type(fault))
        if handler is None:
            return f"{self.name} mode has no handler for {fault.type} faults"
        return handler.reason if isinstance(handler, Refusal) else ""

    def rules(self, spec: RunSpec) -> Refused | None:
        """What of the spec, beyond its faults, it cannot run (None: nothing)."""
        return None

    def refusal(self, spec: RunSpec) -> Refused | None:
        """The first thing of ``spec`` it cannot run, naming the scenario's field (None:
        it runs it): its mode's rules, then each fault against its handler table, then what
        this machine lacks for it. Asked once, when the spec is compiled."""
        refused = self.rules(spec)
        if refused is not None:
            return refused
        for fault in spec.faults:
            why = self.why_not(fault)
            if why:
                return Refused(spec.file, spec.fault_entry(fault),
                               f"fault {fault.id!r} ({fault.type}): {why}; run with --mode sim")
        return self.lacks(spec)

    def lacks(self, spec: RunSpec) -> Refused | None:
        """What this machine lacks to run ``spec`` (asked after the rules and the faults:
        a scenario no machine could run says so first); None: nothing."""
        return None

    def world(self, sc: Scenario, seed: int) -> World:
        """The world the runtime runs: the scenario's, as built for every backend."""
        from elastic_sim.scenario import build_world

        return build_world(sc, seed)

    def steps(self, spec: RunSpec, events: Sequence[TraceEvent]) -> int:
        """The job's steps, as the run's trace (``events``) can show them (what
        "completed" means)."""
        return spec.scenario.workload.steps

    def not_judged(self, spec: RunSpec, events: Sequence[TraceEvent]) -> dict[str, str]:
        """Checks the run's events cannot judge, with why (they say so instead of
        passing)."""
        return {}

    def run(self, spec: RunSpec, emit: Callable[[TraceEvent], None], guard: RunGuard,
            workdir: Path, progress: Progress | None = None) -> RunResult:
        """Run ``spec``, emitting every trace event in run-time order (the runner's own
        ``run_start`` and ``run_end`` are the pipeline's); ``workdir`` holds what its
        processes write; ``guard`` ends a run past the tool's limits. It reads the spec's
        world, faults, seeds, launch options and script, never its scenario (the
        pipeline's)."""
        raise NotImplementedError
