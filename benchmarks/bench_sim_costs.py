"""Where a fault-free torchelastic run's simulation time goes, by what upstream does
periodically: the marginal CPU cost of each kind of traffic, measured by turning its knob
in the same run (each variant in a fresh interpreter, interleaved, best of ``--repeat``),
and the speed that would remain if only some of it were left.

The run is :mod:`bench_sim_speed`'s scenario (``run_scenario`` as the CLI does it, CPU
seconds of the whole run). Components, as CPU milliseconds over the base run:

- ``keep-alives``: the rendezvous keep-alive store writes (upstream's default every 5 s
  per node): the extra cost when the interval is halved, i.e. as many again;
- ``commits``: the checkpoint every ``commit_every`` steps (each worker's message to its
  agent, the agent's commit, and the training stretch that ends there): base minus a run
  with one commit at the end;
- ``monitor grid``: the agent's 0.1 s monitor loop as a polled wait (its ticks, probes and
  re-plans): base minus a run polling every 1 s;
- ``fixed``: a 10-step run (parsing, rendezvous, worker start, exit barrier, writing);
- ``rest``: a run with all three turned down (one commit, 1 s monitor, no keep-alive
  within the run) minus ``fixed``: the monitor's reads of the store at every cache expiry,
  the training stretches and everything else.

The components are measured separately, so they need not add up exactly to the base run
(they overlap a little: a keep-alive also re-plans the monitor's wait).

    python benchmarks/bench_sim_costs.py [--hosts 8 64] [--steps 3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_sim_speed import measure, scenario_raw  # noqa: E402

TARGETS = {8: 10_000, 64: 1_000}
"""Issue 16's targets (x real time) by host count."""


def variants(hosts: int, steps: int) -> dict[str, dict[str, Any]]:
    """The base scenario and one variant per component (plain data)."""
    base = scenario_raw("torchelastic", hosts, steps)
    out = {"base": base}

    def knob(**kw: Any) -> dict[str, Any]:
        raw = copy.deepcopy(base)
        raw["protocol"]["knobs"].update(kw)
        return raw

    out["keep-alive x2"] = knob(keep_alive_interval=2.5)
    once = copy.deepcopy(base)
    once["workload"]["commit_every"] = steps
    out["one commit"] = once
    out["monitor 1 s"] = knob(monitor_interval=1.0)
    quiet = knob(monitor_interval=1.0, keep_alive_interval=100_000.0)
    quiet["workload"]["commit_every"] = steps
    out["quiet"] = quiet
    out["10 steps"] = scenario_raw("torchelastic", hosts, 10)
    return out


def run(hosts: int, steps: int, repeat: int) -> dict[str, dict[str, Any]]:
    """Best-of-``repeat`` CPU seconds (and the rest of the run's figures) per variant;
    the variants take turns so that a burst of load hits all of them."""
    vs = variants(hosts, steps)
    best: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):
        for name, raw in vs.items():
            r = measure(None, raw)
            if name not in best or float(r["cpu_s"]) < float(best[name]["cpu_s"]):
                best[name] = r
    return best


def table(hosts: int, res: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown rows: each component's CPU ms, per simulated second, and the speed left if
    only the fixed cost and that component remained."""
    sim_s = float(res["base"]["sim_s"])
    cpu = {k: 1000.0 * float(v["cpu_s"]) for k, v in res.items()}
    fixed = cpu["10 steps"]
    parts = {
        "keep-alives": cpu["keep-alive x2"] - cpu["base"],
        "commits": cpu["base"] - cpu["one commit"],
        "monitor grid": cpu["base"] - cpu["monitor 1 s"],
        "rest": cpu["quiet"] - fixed,
        "fixed": fixed,
    }
    rows = [f"| {hosts} | whole run | {cpu['base']:,.0f} | {1000 * cpu['base'] / sim_s:,.0f} "
            f"| {1000 * sim_s / cpu['base']:,.0f} |"]
    for name, ms in parts.items():
        left = ms + (fixed if name != "fixed" else 0.0)
        rows.append(f"| {hosts} | {name} | {ms:,.0f} | {1000 * ms / sim_s:,.0f} | "
                    f"{1000 * sim_s / max(left, 1e-9):,.0f} |")
    target = TARGETS.get(hosts)
    if target:
        rows.append(f"| {hosts} | budget for {target:,}x | {1000 * sim_s / target:,.1f} | "
                    f"{1e6 / target:,.0f} | {target:,} |")
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[8, 64])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"torchelastic, fault-free, {args.steps} steps of 0.1 s, best of {args.repeat} "
          "(CPU of the whole run_scenario)", flush=True)
    print("| hosts | component | CPU ms | us per simulated s | x real time with only it "
          "and the fixed cost |")
    print("|---|---|---|---|---|")
    for hosts in args.hosts:
        res = run(hosts, args.steps, args.repeat)
        sim = {k: round(float(v["sim_s"]), 2) for k, v in res.items()}
        for line in table(hosts, res):
            print(line, flush=True)
        print(f"<!-- {hosts} hosts, simulated s per variant: {sim} -->", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
