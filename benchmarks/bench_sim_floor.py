"""The floor that kernel events put under simulation speed: a census of the kernel events
of :mod:`bench_sim_speed`'s fault-free runs, per simulated second and by the callback
each one runs, next to what one kernel event costs when its callback does nothing.

A kernel event is one heap entry popped and its callback run (:class:`elastic_sim.sim.kernel.Call`):
a task resumed, a message or store request arriving, a store reply, a timer, a polled
wait's tick, a stretch's mark. Its bare cost (no-op callbacks chained by ``call_later``,
the queue as deep as the run's) is measured in the same process, best of five. Events
per simulated second times that cost is what the queue alone spends per simulated second,
before any protocol code runs; the whole run's CPU per simulated second (best of
``--repeat``, a run without the census) divided by its events is what an event costs
with its protocol work. ``x real time`` targets allow ``1e6 / target`` microseconds per
simulated second in all (issue 16: 10,000x at 8 hosts, 1,000x at 64).

    python benchmarks/bench_sim_floor.py [--hosts 8 64] [--protocols torchelastic]
        [--steps 3000] [--repeat 3] [--top 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_sim_speed import PROTOCOLS, scenario_raw  # noqa: E402
from elastic_sim.pipeline import simulate  # noqa: E402
from elastic_sim.scenario import Scenario, parse_scenario  # noqa: E402
from elastic_sim.sim import kernel as kmod  # noqa: E402

TARGETS = {8: 10_000, 64: 1_000}
"""Issue 16's targets (x real time) by host count."""


def label(call: Any) -> str:
    """What a kernel event runs: the callback's qualified name, and for a task's resume
    the task's name (``SimTask._resume [keep-alive]``)."""
    fn = call.fn
    name = str(getattr(fn, "__qualname__", type(fn).__name__))
    owner = getattr(fn, "__self__", None)
    task = getattr(owner, "name", None)
    if task is not None and hasattr(owner, "owner"):
        name += f" [{task}]"
    return name


def census(sc: Scenario) -> tuple[float, Counter[str]]:
    """The run's simulated seconds and its kernel events by :func:`label` (cancelled
    timers included: they are popped like any other)."""
    counts: Counter[str] = Counter()
    fire = kmod._FIRE[0]

    def counted(ev: Any) -> None:
        counts[label(ev)] += 1
        fire(ev)

    kmod._FIRE[0] = counted
    try:
        _, _, res = simulate(sc, sc.seed)
    finally:
        kmod._FIRE[0] = fire
    return res.end_time, counts


def run_cpu(sc: Scenario, repeat: int) -> float:
    """Best-of-``repeat`` CPU seconds of the simulation (``runner.simulate``: the run and
    its metrics, no trace file)."""
    best = float("inf")
    for _ in range(repeat):
        cpu = time.process_time()
        simulate(sc, sc.seed)
        best = min(best, time.process_time() - cpu)
    return best


def _noop_run(depth: int, events: int) -> float:
    """CPU seconds of ``events`` no-op kernel events, ``depth`` chains in the queue."""
    k = kmod.Kernel(lambda _ev: None)
    left = [events]

    def tick() -> None:
        if left[0] > 0:
            left[0] -= 1
            k.call_later(0.1, tick)

    for i in range(depth):
        k.call_later(0.1 * i / depth, tick)
    cpu = time.process_time()
    k.run()
    return time.process_time() - cpu


def noop_event_us(depth: int, events: int = 200_000) -> float:
    """Microseconds of CPU per kernel event whose callback does nothing but schedule the
    next one, ``depth`` chains in the queue at once; best of five."""
    return min(_noop_run(depth, events) for _ in range(5)) / (events + depth) * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[8, 64])
    p.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=["torchelastic"])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--top", type=int, default=12, help="callbacks listed per run")
    args = p.parse_args()
    print(f"fault-free, {args.steps} steps of 0.1 s; CPU best of {args.repeat}", flush=True)
    for proto in args.protocols:
        for hosts in args.hosts:
            sc = parse_scenario(scenario_raw(proto, hosts, args.steps), "<bench>")
            sim_s, counts = census(sc)
            total = sum(counts.values())
            cpu = run_cpu(sc, args.repeat)
            noop = noop_event_us(depth=max(8, 4 * hosts))
            per_s = total / sim_s
            print(f"\n{proto}, {hosts} hosts: {sim_s:.1f} simulated s, {total:,} kernel "
                  f"events ({per_s:,.1f} per simulated s)")
            print("| callback | events | per simulated s | queue alone, us per simulated s |")
            print("|---|---|---|---|")
            rest = total
            for name, n in counts.most_common(args.top):
                rest -= n
                print(f"| {name} | {n:,} | {n / sim_s:,.2f} | {n / sim_s * noop:,.1f} |")
            if rest:
                print(f"| (the others) | {rest:,} | {rest / sim_s:,.2f} | "
                      f"{rest / sim_s * noop:,.1f} |")
            run_us = 1e6 * cpu / sim_s
            print(f"- a no-op kernel event: {noop:.2f} us; the queue alone: "
                  f"{per_s * noop:,.0f} us per simulated s")
            print(f"- the whole simulation: {run_us:,.0f} us per simulated s "
                  f"({sim_s / cpu:,.0f}x real time), {1e6 * cpu / total:.1f} us per event "
                  "with its work")
            target = TARGETS.get(hosts)
            if target:
                budget = 1e6 / target
                print(f"- {target:,}x allows {budget:,.0f} us per simulated s: "
                      f"{budget / noop:,.0f} no-op events, or {budget * total / (1e6 * cpu):,.0f}"
                      " events at this run's cost per event", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
