"""One complete c10d dynamic-rendezvous round with the faithful torchelastic model, for N
agents in the simulator: wall seconds, store operations per agent, and how both grow.

Baseline, measured in the same run: bare simpy doing a rendezvous-like round (N joins sent
to one server process, each answered), the workload shared/calibration.md times.

    python benchmarks/bench_rendezvous.py [--agents 100 1000 10000]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import sys
import time
from pathlib import Path
from typing import Any

import simpy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from faults.world import HostSpec, World  # noqa: E402
from protocols.trace import TraceEvent  # noqa: E402


def faithful_round(n: int) -> dict[str, Any]:
    """Run one round for ``n`` agents (min = n // 2, max = n: it completes at max)."""
    import sim

    done: list[TraceEvent] = []

    def emit(ev: TraceEvent) -> None:
        if ev.kind == "rdzv_done":
            done.append(ev)

    world = World(
        hosts=tuple(HostSpec(f"node{i}") for i in range(n)),
        entry="protocols.torchelastic.join_once:rendezvous_once",
        args={"store_host": "node0",
              "knobs": {"min_nodes": max(1, n // 2), "max_nodes": n, "run_id": "bench"}},
        time_limit=3600.0,
    )
    t0 = time.perf_counter()
    result = sim.run(world, [], 0, emit)
    wall = time.perf_counter() - t0
    ranks = sorted(int(e.get("rank")) for e in done)
    ok = not result.hung and ranks == list(range(n)) and all(
        e.get("world_size") == n for e in done)
    return {
        "agents": n,
        "wall_s": wall,
        "ok": ok,
        "formed_at_s": max(e.t for e in done) if done else None,
        "store_ops_per_agent": sum(int(e.get("store_ops")) for e in done) / max(1, len(done)),
    }


def baseline_round(n: int) -> float:
    """Bare simpy: n clients each send a join to one server and wait for its reply."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        env = simpy.Environment()
        inbox: simpy.Store = simpy.Store(env)
        replies = [simpy.Store(env) for _ in range(n)]

        def server() -> Any:
            for _ in range(n):
                i = yield inbox.get()
                yield env.timeout(0.0001)
                replies[i].put("ok")

        def client(i: int) -> Any:
            yield env.timeout(0.0001)
            inbox.put(i)
            yield replies[i].get()

        env.process(server())
        for i in range(n):
            env.process(client(i))
        t0 = time.perf_counter()
        env.run()
        return time.perf_counter() - t0
    finally:
        if gc_was:
            gc.enable()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, nargs="+", default=[100, 1000, 10000])
    args = p.parse_args()
    print(f"{'agents':>7} {'wall s':>8} {'bare simpy s':>13} {'ratio':>7} {'store ops/agent':>16} "
          f"{'round formed at (virtual s)':>28}")
    rows = []
    for n in args.agents:
        row = faithful_round(n)
        base = baseline_round(n)
        rows.append(row)
        status = "" if row["ok"] else "  (ROUND DID NOT FORM CORRECTLY)"
        print(f"{n:>7} {row['wall_s']:>8.2f} {base:>13.4f} {row['wall_s'] / base:>6.0f}x "
              f"{row['store_ops_per_agent']:>16.2f} {row['formed_at_s']:>28.3f}{status}",
              flush=True)
    for a, b in itertools.pairwise(rows):
        k = math.log(b["wall_s"] / a["wall_s"]) / math.log(b["agents"] / a["agents"])
        print(f"growth {a['agents']} -> {b['agents']}: wall ~ N^{k:.2f}")
    thousand = next((r for r in rows if r["agents"] == 1000), None)
    if thousand:
        verdict = "MET" if thousand["wall_s"] < 10 else "NOT MET"
        print(f"N = 1,000 in {thousand['wall_s']:.2f} s (target < 10 s): {verdict}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
