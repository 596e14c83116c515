"""What a search says it did, as ``explore.json`` holds it: its rates and the workers' time,
its space, its mechanisms (new first), and what it covered: the faults that fired and
those that never did (by type and target), the abstract states and transitions reached
and the declared values never reached, how the mechanisms came over time, and a hint on
when to stop (cases since the last new mechanism)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.coverage import never_reached, split
from elastic_sim.faults.model import FAULT_TYPES
from elastic_sim.scenario import fault_dict

if TYPE_CHECKING:
    from elastic_sim.explore import Exploration
    from elastic_sim.findings import Finding


def fired_faults(res: Exploration) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The targets each fault type fired at, and what never fired: per type the hosts it
    could aim at and never did (``*`` for a type never fired at all)."""
    fired: dict[str, set[str]] = {}
    for item in split(res.reached)["fired"]:
        ftype, _, target = item.partition("@")
        fired.setdefault(ftype, set()).add(target)
    never: dict[str, list[str]] = {}
    for t in res.space.types:
        if t not in fired:
            never[t] = ["*"]
            continue
        names_host = any(f.name in ("host", "proc", "groups", "src", "a")
                         for f in FAULT_TYPES[t].__dataclass_fields__.values())
        if names_host:
            hit = {h for targets in fired[t] for h in targets.split(",")}
            missing = [h for h in res.space.hosts if h not in hit]
            if missing:
                never[t] = missing
    return {t: sorted(v) for t, v in sorted(fired.items())}, never


def stopping_hint(res: Exploration) -> tuple[int, str]:
    """Cases since the last new mechanism, and what that suggests."""
    firsts = sorted(f.found_at for f in res.findings)
    since = res.cases - 1 - firsts[-1] if firsts else res.cases
    if len(firsts) < 2:
        return since, ("too few mechanisms to judge; keep going" if res.cases < 200 else
                       "no mechanism in a long while: widen the space (--faults, --vary, "
                       "--max-faults) or stop")
    gaps = [b - a for a, b in itertools.pairwise(firsts)]
    typical = sorted(gaps)[len(gaps) // 2] or 1
    if since > 4 * typical and since >= 50:
        return since, (f"{since} cases since the last new mechanism (they came every "
                       f"~{typical} cases before): diminishing returns, stop or widen the "
                       "space")
    return since, f"{since} cases since the last new mechanism: still finding, keep going"


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "check": f.signature.check,
        "where": f.signature.where,
        "who": f.signature.who,
        "mechanism": str(f.signature),
        "class": f.kind,
        "known_as": f.known.source if f.known is not None else None,
        "known_exactly": f.known.exact if f.known is not None else None,
        "standing": f.standing,
        "message": f.message,
        "cases": f.cases,
        "fault_types": dict(f.fault_types.most_common()),
        "found_at_case": f.found_at,
        "found_s": round(f.found_s, 3),
        "original_faults": [fault_dict(x) for x in f.original],
        "faults": [fault_dict(x) for x in f.faults],
        "seed": f.seed,
        **({"tie_seed": f.tie_seed} if f.tie_seed is not None else {}),
        **({"variation": dict(f.variation)} if f.variation else {}),
        "shrink_runs": f.shrink_runs,
        "shrink_cut_by_time": f.cut,
        "reproducer": str(f.reproducer) if f.reproducer else None,
        "run_dir": str(f.run_dir) if f.run_dir else None,
        "trace_sha256": f.trace_sha256,
        "reproduced": f.reproduced,
    }


def exploration_json(res: Exploration) -> dict[str, Any]:
    """The machine-readable result of a search."""
    parts = split(res.reached)
    fired, never = fired_faults(res)
    since, hint = stopping_hint(res)
    s = res.space
    kinds = [f.kind for f in res.findings]
    return {
        "scenario": res.scenario,
        "seed": res.seed,
        "cases": res.cases,
        "stopped": res.stopped,
        "wall_s": round(res.wall_s, 3),
        "time_s": res.time_s,
        "schedules_per_minute": round(res.per_minute, 1),
        "shrink_runs": res.shrink_runs,
        "runs_per_minute": round(res.runs_per_minute, 1),
        "workers": res.workers,
        "worker_seconds": {"search": round(res.search_s, 3), "shrink": round(res.shrink_s, 3),
                           "reports": round(res.report_s, 3), "idle": round(res.idle_s, 3),
                           "cpu": round(res.cpu_s, 3)},
        "idle_share": round(res.idle_s / (res.workers * res.wall_s), 4) if res.wall_s else 0.0,
        "ignored_checks": list(res.ignored),
        "space": {"hosts": list(s.hosts), "horizon": s.horizon, "startup": s.startup,
                  "types": list(s.types), "max_faults": s.max_faults,
                  "max_duration": s.max_duration, "timescales": list(s.timescales),
                  "spare": list(s.spare), "max_crashes": s.max_crashes,
                  "procs": list(s.procs),
                  "triggers": [t.describe() for t in s.triggers]},
        "around": None if res.around is None else {
            "faults": [fault_dict(f) for f in res.around.faults], "shift_s": res.around.shift,
            "scale": res.around.scale, "retarget": res.around.retarget},
        "search": {"swarm": res.swarm, "guided": res.guided, "corpus": res.corpus,
                   "mutated_cases": res.mutated},
        "mechanisms": {"total": len(res.findings), "new": sum(k != "known" for k in kinds),
                       "broken_promise": kinds.count("broken_promise"),
                       "known": kinds.count("known")},
        "violations": [_finding_json(f) for f in res.findings],
        "coverage": {
            "states": len(parts["states"]),
            "transitions": len(parts["transitions"]),
            "never_reached": never_reached(res.protocol or None, parts["states"]),
            "faults_fired": fired,
            "faults_never_fired": never,
            "curve": [list(p) for p in res.curve],
            "cases_since_new_mechanism": since,
            "stopping_hint": hint,
        },
        "reports_not_rendered": res.unrendered,
        **({"exhaustive": res.exhaustive} if res.exhaustive is not None else {}),
    }


def write_summary(res: Exploration, path: Path) -> None:
    """Write :func:`exploration_json` to ``path`` whole (a temporary name, then renamed:
    a search stopped while writing leaves the previous version)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(exploration_json(res), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = ["exploration_json", "fired_faults", "stopping_hint", "write_summary"]
