"""Delivered messages per wall-second: elastic-sim's runtime against bare simpy doing the
same deliveries, measured in the same run (machines here are noisy).

Workload: N hosts in a ring; each sends a message to its successor and then waits for
one from its predecessor, K times. Every message crosses the star topology (2 links of
50 us). Bare simpy delivers by a scheduled callback into a ``simpy.Store`` and receives
with ``store.get()``: the cheapest idiomatic simpy. Target: elastic-sim at most 2x slower.

    python benchmarks/bench_messages.py [--hosts 10 1000 10000] [--messages 200000]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import simpy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elastic_sim.protocols.api import Runtime  # noqa: E402
from elastic_sim.world import HostSpec, World  # noqa: E402

LATENCY = 2 * 0.00005


async def ring_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Send to the successor, receive from the predecessor, ``rounds`` times."""
    n, rounds = int(args["n"]), int(args["rounds"])
    me = int(rt.host[1:])
    dst = f"h{(me + 1) % n}/main"
    for k in range(rounds):
        rt.send(dst, {"k": k})
        await rt.recv()
    return 0


def run_elastic_sim(n: int, rounds: int) -> float:
    """Wall seconds for the workload in elastic-sim."""
    from elastic_sim import sim

    world = World(
        hosts=tuple(HostSpec(f"h{i}") for i in range(n)),
        entry="benchmarks.bench_messages:ring_main",
        args={"n": n, "rounds": rounds},
    )
    count = 0

    def emit(_: object) -> None:
        nonlocal count
        count += 1

    t0 = time.perf_counter()
    result = sim.run(world, [], 0, emit)
    wall = time.perf_counter() - t0
    assert not result.hung and all(c == 0 for c in result.exit_codes.values()), result
    return wall


def run_bare_simpy(n: int, rounds: int) -> float:
    """Wall seconds for the same deliveries in bare simpy."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        env = simpy.Environment()
        boxes = [simpy.Store(env) for _ in range(n)]

        def deliver(dst: int, msg: dict[str, int]) -> None:
            ev = env.timeout(LATENCY)
            def put(_: simpy.Event) -> None:
                boxes[dst].put(msg)

            ev.callbacks.append(put)

        def proc(i: int) -> Any:
            nxt = (i + 1) % n
            for k in range(rounds):
                deliver(nxt, {"k": k})
                yield boxes[i].get()

        for i in range(n):
            env.process(proc(i))
        t0 = time.perf_counter()
        env.run()
        return time.perf_counter() - t0
    finally:
        if gc_was:
            gc.enable()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[10, 1000, 10000])
    p.add_argument("--messages", type=int, default=200_000, help="messages per measurement")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, default=None, help="also write the table as JSON")
    args = p.parse_args()
    rows = []
    print(f"{'hosts':>7} {'messages':>9} {'elastic-sim msg/s':>18} {'bare simpy msg/s':>17} "
          f"{'overhead':>9}")
    for n in args.hosts:
        rounds = max(1, args.messages // n)
        msgs = n * rounds
        ours, base = [], []
        for _ in range(args.repeat):  # interleaved, so drift hits both alike
            ours.append(run_elastic_sim(n, rounds))
            base.append(run_bare_simpy(n, rounds))
        o, b = statistics.median(ours), statistics.median(base)
        row = {"hosts": n, "messages": msgs, "elastic_sim_msg_per_s": msgs / o,
               "bare_simpy_msg_per_s": msgs / b, "overhead": o / b}
        rows.append(row)
        print(f"{n:>7} {msgs:>9} {msgs / o:>18,.0f} {msgs / b:>17,.0f} {o / b:>8.2f}x",
              flush=True)
    worst = max(r["overhead"] for r in rows)
    print(f"worst overhead {worst:.2f}x (target <= 2.00x): {'MET' if worst <= 2 else 'NOT MET'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
