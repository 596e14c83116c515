"""A :class:`RunSpec`: one run, compiled once from a scenario and what the command line adds.

Compiling resolves a built-in scenario's name to its file, loads and validates the
scenario, expands its faults (failure-rate models, replayed traces), asks the backend
once whether it can run it all (:meth:`elastic_sim.backends.Backend.refusal`) and builds
the world the runtime runs. Everything downstream (the pipeline, campaigns, the Hypothesis
API, the pytest plugin) takes a spec, never a scenario file or a ``--mode`` string again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_sim.backends import BACKENDS, Backend, backend
from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import Fault
from elastic_sim.scenario import Scenario
from elastic_sim.world import World

if TYPE_CHECKING:
    from elastic_sim.real.cluster.launchers import LaunchOptions

MAX_SEED = 2**64 - 1
"""The largest seed a scenario may name (its schema's bound); ``--seed`` holds to it."""


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs, checked: the scenario, its seeds, the backend that runs
    it and the world it runs in. Make one with :func:`compile_spec` (or
    :meth:`for_case` from another)."""

    scenario: Scenario
    seed: int
    backend: Backend
    faults: tuple[Fault, ...]
    """The scenario's faults, expanded, in schedule order (or a case's)."""
    world: World
    file: str = "<scenario>"
    """Where the scenario came from: what messages about it name."""
    tie_seed: int | None = None
    """The order of same-time events (a deterministic backend's; None: scheduling order)."""
    launch: LaunchOptions | None = None
    """Where real hosts go (``--launcher`` and its options); None: this machine."""
    script: tuple[str, ...] = ()
    """A user's training script and its arguments (``--script``; its backend takes one)."""

    @property
    def mode(self) -> str:
        """The backend's name (``--mode``)."""
        return self.backend.name

    def fault_entry(self, fault: Fault) -> str:
        """``faults[i]`` of the scenario entry that gave ``fault`` (a failure-rate model or
        a replayed trace names the entry that expands into it)."""
        ids = [m.id or f"f{i}-{m.type}" for i, m in enumerate(self.scenario.faults)]
        if fault.id in ids:
            return f"faults[{ids.index(fault.id)}]"
        expanded = [i for i, fid in enumerate(ids) if fault.id.startswith(fid + "-")]
        return f"faults[{expanded[0]}]" if expanded else "faults"

    def for_case(self, faults: tuple[Fault, ...] | list[Fault], seed: int,
                 tie_seed: int | None = None) -> RunSpec:
        """This spec with another fault schedule and seeds (a search's case; ``tie_seed``
        None keeps this spec's): the world is the same but for the seed its processes
        draw from."""
        world = dataclasses.replace(self.world, args={**self.world.args, "seed": seed})
        return dataclasses.replace(self, faults=tuple(faults), seed=seed, world=world,
                                   tie_seed=self.tie_seed if tie_seed is None else tie_seed)

    def rerun(self, seed: int) -> RunSpec:
        """Another run of this spec, with ``seed``: its world built afresh by its backend
        (a real store on a port free now)."""
        return dataclasses.replace(self, seed=seed,
                                   world=self.backend.world(self.scenario, seed))


def load(scenario: str | Path) -> tuple[Scenario, str]:
    """The scenario a command-line argument names (a file, else a built-in scenario's name,
    resolved once here) and the file it came from."""
    from elastic_sim.builtin import scenario_path
    from elastic_sim.scenario import load_scenario

    path = scenario_path(str(scenario))
    return load_scenario(path), str(path)


def compile_spec(
    scenario: str | Path | Scenario,
    *,
    seed: int | None = None,
    mode: str | Backend = "sim",
    file: str | None = None,
    fidelity: str | None = None,
    faults: list[Fault] | tuple[Fault, ...] | None = None,
    tie_seed: int | None = None,
    launch: LaunchOptions | None = None,
    script: tuple[str, ...] = (),
) -> RunSpec:
    """Compile one run: ``scenario`` (a file or built-in name, or a loaded scenario), its
    ``seed`` (default: the scenario's), the backend (``mode``), ``fidelity`` and
    ``tie_seed`` overrides, ``faults`` in place of the scenario's, where hosts go
    (``launch``) and a user's ``script``. :class:`ScenarioError` (exit 2) for anything
    the backend refuses, before anything runs."""
    if isinstance(scenario, Scenario):
        sc, where = scenario, file or "<scenario>"
    else:
        sc, where = load(scenario)
    if fidelity is not None:
        sc = sc.model_copy(update={"fidelity": fidelity})
    runner = mode if isinstance(mode, Backend) else backend(mode)
    seed = sc.seed if seed is None else seed
    if not 0 <= seed <= MAX_SEED:
        raise ScenarioError("--seed", "", f"expected a seed in 0..2**64-1, got {seed}")
    if script and not runner.takes_script:
        raise ScenarioError("--script", "", f"--mode {runner.name} runs the bundled worker; a "
                            "training script runs under --mode "
                            + " or ".join(n for n, b in _backends() if b.takes_script))
    if launch is not None and launch.launcher not in runner.launchers:
        able = [n for n, b in _backends() if launch.launcher in b.launchers]
        raise ScenarioError("--launcher", "", f"--launcher {launch.launcher} needs --mode "
                            + " or ".join(able))
    if tie_seed is None and runner.deterministic:
        tie_seed = sc.tie_seed
    elif not runner.deterministic:
        tie_seed = None
    fault_list = tuple(sc.fault_objects() if faults is None else faults)
    draft = RunSpec(sc, seed, runner, fault_list, _NO_WORLD, where, tie_seed, launch,
                    tuple(script))
    refused = runner.refusal(draft)
    if refused is not None:
        raise refused
    return dataclasses.replace(draft, world=runner.world(sc, seed))


def _backends() -> list[tuple[str, Backend]]:
    return list(BACKENDS.items())


_NO_WORLD = World(hosts=(), entry="", args={})
"""A spec's world before its backend builds it (what refusals are asked about)."""
