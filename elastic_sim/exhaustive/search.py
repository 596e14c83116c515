"""``elastic-sim explore --exhaustive``: enumerate the scenario's small world up to a
depth, replay every violating path through the full simulation as a search's cases, and
report what the simulation showed like any finding, with what was enumerated and how long
it took."""

from __future__ import annotations

from typing import Any

from elastic_sim.cases import Outcome
from elastic_sim.errors import ScenarioError
from elastic_sim.exhaustive import enumerate_world
from elastic_sim.exhaustive.replay import replays, world_for
from elastic_sim.explore import Exploration, explore
from elastic_sim.explore_summary import write_summary
from elastic_sim.faults.schedule import FaultSpace
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, fault_dict, with_faults

DEPTH = 24
"""Default bound: decisions (and ticks) on one path."""


def explore_exhaustively(sc: Scenario, space: FaultSpace, *, depth: int = DEPTH,
                         **search: Any) -> Exploration:
    """Enumerate ``sc``'s small world up to ``depth`` moves, replay every violating path
    in the sim (``search``: :func:`~elastic_sim.explore.explore`'s options), and say
    what was enumerated (``Exploration.exhaustive``)."""
    world = world_for(sc)
    if world is None:
        raise ScenarioError("--exhaustive", "", f"no small world for protocol "
                            f"{sc.protocol.name!r}; expected torchelastic or horovod")
    found = enumerate_world(world, depth)
    base = with_faults(sc, [], seed=sc.seed, name=sc.name)
    events, _, _ = simulate(base, sc.seed)
    reps = replays(world, found.paths, sc, list(events), space.horizon)
    cases = [c for r in reps for c in r.cases]
    shown: dict[int, set[str]] = {}

    def seen(out: Outcome) -> None:
        shown[out.case.index] = {s.check for s in out.signatures}

    res = explore(sc, space, cases=cases, observer=seen, **search)
    paths, at = [], 0
    for r in reps:
        idx = range(at, at + len(r.cases))
        at += len(r.cases)
        paths.append({
            "check": r.path.broken.check,
            "why": r.path.broken.why,
            "path": r.path.describe(),
            "faults": [m.label for m in r.path.faults],
            "replays": [[fault_dict(f) for f in c.faults] for c in r.cases[:1]],
            "cases": len(r.cases),
            "shown_in_sim": sum(1 for i in idx if r.path.broken.check in shown.get(i, ())),
        })
    res.exhaustive = {
        "world": type(world).__name__, "depth": depth, "states": found.states,
        "transitions": found.transitions, "deepest": found.depth,
        "truncated": found.truncated, "seconds": round(found.seconds, 3), "paths": paths,
    }
    if search.get("out_dir") is not None:
        write_summary(res, search["out_dir"] / "explore.json")
    return res


__all__ = ["DEPTH", "explore_exhaustively"]
