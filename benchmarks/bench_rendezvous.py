"""One complete c10d dynamic-rendezvous round with the faithful torchelastic model, for N
agents in the simulator: wall seconds, store operations per agent, and how both grow.

Baseline, measured in the same run: bare simpy doing a rendezvous-like round (N joins sent
to one server process, each answered), the workload shared/calibration.md times.

The round: N agents (min N/2, max N; a last call long enough that it completes at max)
join through one store; the run ends when all have closed. Upstream's join is a
compare-and-set loop on ONE key holding the whole state, retried at once after a lost
race: when agents arrive faster than a read-modify-CAS round trip, they contend, and
each success costs every contender a store round trip. Store operations per agent then
grow with N, and every operation carries the whole O(N) state. Heartbeats are writes of
that key too (every participant every ``keep_alive_interval``, 5 s upstream): at N/5
writes a second on top of the joins, large rounds saturate the store even when agents
arrive slowly. Each N runs in a child process with a wall limit (``--wall-limit``), so a
size that does not finish is reported as such instead of stalling the table;
``--progress S`` shows how far the round got.

    python benchmarks/bench_rendezvous.py [--agents 100 1000 10000] [--spread 10]
        [--keep-alive-interval 30] [--progress 1] [--wall-limit 600] [--json F]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import queue
import resource
import sys
import time
from pathlib import Path
from typing import Any

import simpy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elastic_sim.trace import TraceEvent  # noqa: E402
from elastic_sim.world import HostSpec, World  # noqa: E402


def _progress(simulation: Any, every: float, t0: float) -> None:
    """Every ``every`` virtual seconds, print (to stderr) where the round stands: the
    participants in the stored state and the store's queue. Read-only: it changes no
    event of the run."""
    from elastic_sim.protocols.torchelastic.backend import C10dBackend
    from elastic_sim.protocols.torchelastic.state import RendezvousState

    kernel = simulation.kernel

    def tick() -> None:
        server = simulation.stores.servers.get("node0:29400")
        joined, complete, queued = 0, False, 0
        if server is not None:
            got = C10dBackend._decode(server.data.get("torch.rendezvous.bench", b"Y2FuaW1hZGFt"))
            if got is not None:
                state = RendezvousState.decode_shared(got[0])
                joined, complete = len(state.participants), state.complete
            queued = max(0.0, server.busy_until - kernel.now) / simulation.stores.service_time
        print(f"  [{time.perf_counter() - t0:7.1f} s wall] virtual {kernel.now:7.1f} s: "
              f"{joined} participants{' (complete)' if complete else ''}, "
              f"store queue {queued:.0f} requests", file=sys.stderr, flush=True)
        kernel.call_later(every, tick)

    kernel.call_later(every, tick)


def faithful_round(n: int, spread: float = 0.0, knobs: dict[str, Any] | None = None,
                   progress: float = 0.0) -> dict[str, Any]:
    """Run one round for ``n`` agents (min = n // 2, max = n: it completes at max); agent i
    starts at ``i * spread / n`` seconds (0: all at once). ``knobs`` override upstream's
    defaults; ``progress`` > 0 prints the round's state every that many virtual seconds."""
    from elastic_sim.sim.run import Simulation

    done: list[TraceEvent] = []

    def emit(ev: TraceEvent) -> None:
        if ev.kind == "rdzv_done":
            done.append(ev)

    world = World(
        hosts=tuple(HostSpec(f"node{i}", start_at=i * spread / n) for i in range(n)),
        entry="elastic_sim.protocols.torchelastic.join_once:rendezvous_once",
        args={"store_host": "node0",
              "knobs": {"min_nodes": max(1, n // 2), "max_nodes": n, "run_id": "bench",
                        "last_call_timeout": 3000.0, "join_timeout": 3000.0, **(knobs or {})}},
        time_limit=3600.0,
    )
    t0 = time.perf_counter()
    gc.disable()  # as elastic_sim.sim.run does
    try:
        simulation = Simulation(world, 0, emit)
        if progress > 0:
            _progress(simulation, progress, t0)
        result = simulation.run([])
    finally:
        gc.enable()
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
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
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


def _child(n: int, spread: float, knobs: dict[str, Any], progress: float, out: Any) -> None:
    out.put(faithful_round(n, spread, knobs, progress))


def timed_round(n: int, wall_limit: float, spread: float = 0.0,
                knobs: dict[str, Any] | None = None, progress: float = 0.0) -> dict[str, Any]:
    """:func:`faithful_round` in a child process, given up after ``wall_limit`` seconds."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_child, args=(n, spread, knobs or {}, progress, q), daemon=True)
    t0 = time.perf_counter()
    proc.start()
    try:
        row: dict[str, Any] = q.get(timeout=wall_limit)
    except queue.Empty:
        row = {"agents": n, "wall_s": None, "ok": False, "formed_at_s": None,
               "store_ops_per_agent": None,
               "note": f"did not finish within {wall_limit:.0f} s wall"}
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
    row["child_wall_s"] = time.perf_counter() - t0
    return row


def growth(rows: list[dict[str, Any]], key: str) -> list[tuple[int, int, float]]:
    """Exponent k of ``key ~ N^k`` between consecutive sizes that finished."""
    done = [r for r in rows if r.get(key)]
    return [(a["agents"], b["agents"],
             math.log(b[key] / a[key]) / math.log(b["agents"] / a["agents"]))
            for a, b in itertools.pairwise(done)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--wall-limit", type=float, default=600.0,
                   help="seconds of wall time one size may take")
    p.add_argument("--spread", type=float, default=0.0,
                   help="agents start evenly over this many seconds (default: all at once)")
    p.add_argument("--keep-alive-interval", type=float,
                   help="seconds between heartbeats (upstream's default: 5)")
    p.add_argument("--progress", type=float, default=0.0, metavar="S",
                   help="print the round's progress every S virtual seconds")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    knobs = ({} if args.keep_alive_interval is None
             else {"keep_alive_interval": args.keep_alive_interval})
    print(f"{'agents':>7} {'wall s':>8} {'bare simpy s':>13} {'ratio':>7} {'store ops/agent':>16} "
          f"{'round formed at (virtual s)':>28} {'max RSS MB':>11}", flush=True)
    rows = []
    for n in args.agents:
        row = timed_round(n, args.wall_limit, args.spread, knobs, args.progress)
        row["spread_s"] = args.spread
        row["knobs"] = knobs
        row["bare_simpy_s"] = base = baseline_round(n)
        rows.append(row)
        if row["wall_s"] is None:
            print(f"{n:>7} {'—':>8} {base:>13.4f} {'—':>7} {'—':>16} {'—':>28}  "
                  f"({row['note']})", flush=True)
            continue
        status = "" if row["ok"] else "  (ROUND DID NOT FORM CORRECTLY)"
        print(f"{n:>7} {row['wall_s']:>8.2f} {base:>13.4f} {row['wall_s'] / base:>6.0f}x "
              f"{row['store_ops_per_agent']:>16.2f} {row['formed_at_s']:>28.3f} "
              f"{row['max_rss_mb']:>11.0f}{status}", flush=True)
    for a, b, k in growth(rows, "wall_s"):
        print(f"growth {a} -> {b}: wall ~ N^{k:.2f}")
    for a, b, k in growth(rows, "store_ops_per_agent"):
        print(f"growth {a} -> {b}: store ops per agent ~ N^{k:.2f}")
    thousand = next((r for r in rows if r["agents"] == 1000), None)
    if thousand:
        w = thousand["wall_s"]
        verdict = "MET" if w is not None and w < 10 and thousand["ok"] else "NOT MET"
        shown = "did not finish" if w is None else f"{w:.2f} s"
        print(f"N = 1,000: {shown} (target < 10 s): {verdict}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
