"""Post-processing of a run: the CPU seconds ``run_scenario`` spends on a fault-free
training run besides simulating it (reading the trace for metrics, checks, expectations,
the contract and summary.json), this tree against a baseline tree in the same run.

Each measurement runs ``run_scenario`` (as the CLI does it, without report images) in a
fresh interpreter with the tree first on the path, interleaved with the baseline's; the
process's CPU time is split into the runtime (the sim backend's ``run``: the simulation and
trace writing) and the rest (post-processing). Best of ``--repeat``.

    python benchmarks/bench_post.py [--hosts 8 64] [--steps 3000] [--baseline main]
        [--protocol torchelastic] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim_speed import PROTOCOLS, scenario_raw
from trees import RUN_SIM, env_for, install

CHILD = RUN_SIM + r"""
import json, sys, tempfile, time
from pathlib import Path
from elastic_sim.scenario import parse_scenario
spent = [0.0]
def wrap(inner):
    def timed(*a, **k):
        cpu = time.process_time()
        try:
            return inner(*a, **k)
        finally:
            spent[0] += time.process_time() - cpu
    return timed
patch_runtime(wrap)
sc = parse_scenario(json.loads(sys.argv[1]), "<bench>")
with tempfile.TemporaryDirectory() as d:
    cpu = time.process_time()
    rep = run_sim(sc, Path(d))
    cpu = time.process_time() - cpu
print(json.dumps({"total": cpu, "runtime": spent[0], "post": cpu - spent[0],
                  "passed": rep.passed}))
"""


def measure(tree: Path | None, raw: dict[str, Any]) -> dict[str, Any]:
    """One run of ``raw`` with the code installed in ``tree`` (None: this checkout), in
    a fresh interpreter."""
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(raw)], cwd=cwd,
                             env=env_for(tree), capture_output=True, text=True, check=True)
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[8, 64])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--protocol", choices=PROTOCOLS, default="torchelastic")
    p.add_argument("--baseline", default="main", help="git ref of the baseline")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = install(args.baseline, Path(tmp))
        print(f"{args.protocol}, {args.steps} steps, CPU s, best of {args.repeat}")
        print("| hosts | run_scenario (this) | run_scenario (baseline) | post-processing (this)"
              " | post-processing (baseline) | post-processing speed-up |")
        print("|---|---|---|---|---|---|")
        for hosts in args.hosts:
            raw = scenario_raw(args.protocol, hosts, args.steps)
            runs: dict[str, list[dict[str, Any]]] = {"this": [], "base": []}
            for _ in range(args.repeat):
                runs["this"].append(measure(None, raw))
                runs["base"].append(measure(base, raw))
            best = {k: {f: min(float(r[f]) for r in v) for f in ("total", "post")}
                    for k, v in runs.items()}
            this, before = best["this"], best["base"]
            print(f"| {hosts} | {this['total']:.2f} | {before['total']:.2f} | "
                  f"{this['post']:.3f} | {before['post']:.3f} | "
                  f"{before['post'] / max(this['post'], 1e-9):.1f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
