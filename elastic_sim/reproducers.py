"""A finding's reproducer: the scenario file a user runs to see the mechanism again (its
shrunk schedule, seeds and drawn values pinned, the scenario's own faults as the case had
them and said so), and its run, made the way a user makes it (``elastic-sim run FILE``,
without the HTML report, which can wait: ``elastic-sim report DIR``).

Written on a worker, beside the shrink that made it (:mod:`elastic_sim.case_pool`), so the
search never waits on it; the YAML comes back as text and the run directory as files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from elastic_sim.faults.around import Around, moves
from elastic_sim.mechanisms import Signature, signatures_of
from elastic_sim.scenario import Scenario, scenario_dict, with_faults
from elastic_sim.shrinking import Shrunk
from elastic_sim.variation import apply_variation


@dataclass(frozen=True)
class Reproducer:
    """A written reproducer: its name, its YAML, and what its run showed (``reproduced``
    None: not run, the search's time was up)."""

    name: str
    text: str
    reproduced: bool | None = None
    trace_sha256: str = ""
    standing: str | None = None
    """The mechanism's check against the contract, as the reproducer's run judged it."""


def describe(sc: Scenario, shrunk: Shrunk, message: str, original: int,
             around: Around | None) -> str:
    """The reproducer's description: what it shows, how it was shrunk, what was drawn,
    and how the scenario's own faults stand in it (kept, or moved and why)."""
    small = shrunk.case
    desc = (f"Found by elastic-sim explore of {sc.name}: {shrunk.signature} - {message}. "
            f"Shrunk from {original} to {len(small.faults)} faults.")
    if small.variation:
        desc += " Varied: " + ", ".join(f"{p}={v}" for p, v in small.variation) + "."
    if around is not None and around.faults:
        moved = moves(small.faults, around)
        if not moved:
            desc += " The scenario's own faults are kept as written."
        else:
            why = ("the shrink did not get to put them back as written (the search's time "
                   "ran out)" if shrunk.cut else "as written, the schedule does not show this "
                   "mechanism")
            desc += " The scenario's own faults: " + "; ".join(moved) + f" ({why})."
    return desc


def reproducer_scenario(sc: Scenario, shrunk: Shrunk, message: str, original: int,
                        around: Around | None, name: str) -> Scenario:
    """The reproducer of ``shrunk`` as a scenario."""
    small = shrunk.case
    return with_faults(apply_variation(sc, small.variation), list(small.faults),
                       seed=small.seed, name=name,
                       description=describe(sc, shrunk, message, original, around),
                       tie_seed=small.tie_seed)


def write_reproducer(repro: Scenario, out_dir: Path, name: str, target: Signature,
                     deadline: float | None = None) -> Reproducer:
    """Write ``repro`` as ``<out_dir>/<name>.yaml`` and, unless the wall-clock
    ``deadline`` has passed, run it as a user would into ``<out_dir>/<name>/`` (trace
    and summary) and note whether it shows ``target`` again."""
    import yaml

    from elastic_sim.pipeline import execute
    from elastic_sim.spec import compile_spec

    text = yaml.safe_dump(scenario_dict(repro), sort_keys=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    if deadline is not None and time.time() >= deadline:
        return Reproducer(name, text)
    report = execute(compile_spec(path), out_dir / name, write_report=False)
    shown = target in signatures_of(report.checks, (), report.events)
    standing = report.contract.standing.get(target.check) if report.contract else None
    return Reproducer(name, text, shown, report.result.trace_sha256, standing)


__all__ = ["Reproducer", "describe", "reproducer_scenario", "write_reproducer"]
