"""The scenarios that ship with elastic-sim, found by name from any directory.

``elastic-sim run scale_down`` runs ``elastic_sim/scenarios/scale_down.yaml``;
``torchelastic/worker_crash`` names one in a subfolder. A path that exists always wins.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from elastic_sim.errors import ScenarioError


def builtin_dir() -> Path:
    """The folder of the built-in scenarios (package data)."""
    return Path(str(files("elastic_sim.scenarios")))


def builtin_names() -> list[str]:
    """Every built-in scenario's name (its path under the folder, without ``.yaml``)."""
    root = builtin_dir()
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))


def scenario_path(arg: str) -> Path:
    """The scenario file ``arg`` names: a file, else a built-in scenario's name.

    :class:`ScenarioError` (exit 2) when it is neither."""
    path = Path(arg)
    if path.exists():
        return path
    name = arg.removesuffix(".yaml")
    if not path.is_absolute() and ".." not in Path(name).parts:
        found = builtin_dir() / f"{name}.yaml"
        if found.is_file():
            return found
    from elastic_sim.registry import suggest

    raise ScenarioError(arg, "", "no such file or built-in scenario"
                        + suggest(name, builtin_names())
                        + " (`elastic-sim scenarios` lists the built-in ones)")
