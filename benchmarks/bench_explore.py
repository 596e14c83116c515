"""Schedules per minute of ``elastic-sim explore`` on a 4-host scenario, with 1 and 2 workers,
against a same-run baseline: the bare simulator running the very same generated cases in
a loop (no checks, no process pool). Machines here are noisy, so ratios matter more than
absolute rates.

Two rates per run, both over the search's whole wall time (shrinking included):

- ``new_per_min``: new schedules explored per minute (the budget's cases; a shrink run is
  not a new schedule);
- ``runs_per_min``: every simulated run per minute, search and shrink runs together: the
  figure to hold against the bare simulator (``w1_runs_vs_baseline``).

``w1_cpu_vs_baseline`` is the same comparison by CPU time per run (the bare simulator's
CPU ms per case over explore's per search or shrink run), which other processes on the
machine disturb far less than wall-clock rates. ``w2_vs_w1_new`` and ``w2_vs_w1_runs``
are the 2-worker speed-ups (the same cases and the same shrink runs both ways: the
findings and shrink-run counts do not depend on workers). ``worker_s`` splits workers x
wall time into the seconds workers ran search cases, ran shrinks, and the rest (``idle``:
starting, waiting for a task, and with one worker the main process's own bookkeeping);
``cpu`` is the CPU seconds within those search and shrink seconds: where it falls short
of them, other processes had the cores (and no speed-up can show). Workers fork on Linux
(a tenth of a second for two; spawned interpreters take seconds).

``coverage_ms`` and ``coverage_share`` are what reading a case's coverage costs (its
abstract states, transitions and fired faults, :func:`elastic_sim.coverage.reach`, from
the run's recorded events) in CPU milliseconds, and as a share of the case's run and
checks, over the same cases.

Scenarios: the static protocol (scenarios/scale_down.yaml, 4 hosts) and torchelastic
(scenarios/torchelastic/scale_down.yaml widened to 4 hosts, max_nodes 4).

    python benchmarks/bench_explore.py [--budget 400] [--protocols static torchelastic]
        [--repeat N]   (1 and 2 workers alternate N times; each keeps its fastest run)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elastic_sim.explore import Exploration, explore, make_case, space_for  # noqa: E402
from elastic_sim.scenario import (  # noqa: E402
    Scenario,
    build_world,
    load_scenario,
    parse_scenario,
    scenario_dict,
)

SCENARIOS = {
    "static": ROOT / "scenarios" / "scale_down.yaml",
    "torchelastic": ROOT / "scenarios" / "torchelastic" / "scale_down.yaml",
}


def four_hosts(sc: Scenario) -> Scenario:
    """``sc`` on four hosts (max_nodes/max_hosts raised to 4 where the protocol has it)."""
    raw = scenario_dict(sc)
    raw["cluster"]["hosts"] = 4
    knobs = raw["protocol"].setdefault("knobs", {})
    for key in ("max_nodes", "max_hosts"):
        if key in knobs:
            knobs[key] = max(4, int(knobs[key]))
    raw["faults"] = []
    return parse_scenario(raw, f"<{sc.name} on 4 hosts>")


def baseline_rate(sc: Scenario, budget: int, seed: int) -> tuple[float, float]:
    """Cases per minute of the bare simulator over the same cases (in-process), and its
    CPU milliseconds per case."""
    from elastic_sim import sim

    space = space_for(sc)
    cases = [make_case(seed, i, space) for i in range(budget)]
    start, cpu = time.perf_counter(), time.process_time()
    for case in cases:
        world = build_world(sc, case.seed)
        sim.run(world, case.faults, case.seed, lambda _ev: None)
    return (60.0 * budget / (time.perf_counter() - start),
            1000.0 * (time.process_time() - cpu) / budget)


def coverage_cost(sc: Scenario, budget: int, seed: int) -> tuple[float, float]:
    """CPU milliseconds per case of reading its coverage, and their share of the case's run
    and checks (the same cases, in this process)."""
    from elastic_sim.cases import case_run
    from elastic_sim.checks import run_checks
    from elastic_sim.coverage import reach

    space = space_for(sc)
    run_ms = read_ms = 0.0
    for i in range(budget):
        case = make_case(seed, i, space)
        cpu = time.process_time()
        events, _ = case_run(sc, case)
        run_checks(events)
        mid = time.process_time()
        reach(events.raw, sc.protocol.name)
        run_ms += 1000.0 * (mid - cpu)
        read_ms += 1000.0 * (time.process_time() - mid)
    return read_ms / budget, read_ms / run_ms if run_ms else 0.0


def _figures(res: Exploration) -> dict[str, Any]:
    return {
        "wall_s": round(res.wall_s, 1),
        "new_per_min": round(res.per_minute, 1),
        "runs_per_min": round(res.runs_per_minute, 1),
        "shrink_runs": res.shrink_runs,
        "worker_s": {"search": round(res.search_s, 1), "shrink": round(res.shrink_s, 1),
                     "idle": round(res.idle_s, 1), "cpu": round(res.cpu_s, 1)},
        "cpu_ms_per_run": round(1000.0 * res.cpu_s / (res.cases + res.shrink_runs), 2),
    }


def measure(name: str, budget: int, seed: int, repeat: int = 1) -> dict[str, Any]:
    """Baseline and explore rates (1 and 2 workers) for one protocol; with ``repeat``,
    1 and 2 workers alternate that many times and each keeps its fastest run."""
    sc = four_hosts(load_scenario(SCENARIOS[name]))
    space = space_for(sc)
    out: dict[str, Any] = {"scenario": name, "hosts": 4, "budget": budget,
                           "horizon_s": space.horizon, "repeat": repeat}
    rate, cpu_ms = baseline_rate(sc, budget, seed)
    out["baseline_per_min"], out["baseline_cpu_ms"] = round(rate, 1), round(cpu_ms, 2)
    cov_ms, share = coverage_cost(sc, budget, seed)
    out["coverage_ms"], out["coverage_share"] = round(cov_ms, 3), round(share, 4)
    found: set[tuple[tuple[str, str, int], ...]] = set()
    best: dict[int, Exploration] = {}
    for _ in range(repeat):
        for workers in (1, 2):
            res = explore(sc, space, seed=seed, budget=budget, workers=workers)
            found.add(tuple((str(f.signature), repr(f.faults), f.shrink_runs)
                            for f in res.findings))
            if workers not in best or res.wall_s < best[workers].wall_s:
                best[workers] = res
    out["w1"], out["w2"] = _figures(best[1]), _figures(best[2])
    out["violations"] = [str(f.signature) for f in best[1].findings]
    out["same_findings_every_run"] = len(found) == 1
    out["w1_runs_vs_baseline"] = round(out["w1"]["runs_per_min"] / out["baseline_per_min"], 2)
    out["w1_cpu_vs_baseline"] = round(out["baseline_cpu_ms"] / out["w1"]["cpu_ms_per_run"], 2)
    out["w2_vs_w1_new"] = round(out["w2"]["new_per_min"] / out["w1"]["new_per_min"], 2)
    out["w2_vs_w1_runs"] = round(out["w2"]["runs_per_min"] / out["w1"]["runs_per_min"], 2)
    return out


def main() -> None:
    """Print one JSON line per protocol."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1,
                   help="alternate 1 and 2 workers this many times; keep each one's fastest")
    p.add_argument("--protocols", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = p.parse_args()
    for name in args.protocols:
        print(json.dumps(measure(name, args.budget, args.seed, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
