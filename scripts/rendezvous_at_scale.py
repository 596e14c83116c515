#!/usr/bin/env python3
"""The rendezvous at scale: ``studies/rendezvous_4000_hosts.yaml`` (torchrun 2.13's start,
rendezvous and rank assignment, no faults) at the sizes asked, each simulated and read
back: when the first and the last agent finished the rendezvous, when the last had its
workers' ranks (virtual seconds), and the CPU seconds the simulation took.

    python scripts/rendezvous_at_scale.py [--hosts N ...] [--seed S]

Default: the file's own size (4,000 hosts). Published: about 10 s at 4,000 hosts after
pytorch#124982 (373 s before).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario
from elastic_sim.strict_yaml import load_yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "studies" / "rendezvous_4000_hosts.yaml"


def at_size(raw: dict[str, Any], hosts: int, start_over: float | None = None
            ) -> dict[str, Any]:
    """The scenario with ``hosts`` hosts (and the knobs' node counts to match), starting
    over ``start_over`` seconds (None: as the file says)."""
    knobs = {**raw["protocol"]["knobs"], "min_nodes": hosts, "max_nodes": hosts}
    cluster = {**raw["cluster"], "hosts": hosts}
    if start_over is not None:
        cluster["start_over"] = start_over
    return {**raw, "name": f"rendezvous_{hosts}_hosts",
            "protocol": {**raw["protocol"], "knobs": knobs}, "cluster": cluster}


def measure(raw: dict[str, Any], hosts: int, seed: int, start_over: float | None = None
            ) -> dict[str, float]:
    """One size's figures."""
    sc = parse_scenario(at_size(raw, hosts, start_over), str(SCENARIO))
    c0 = time.process_time()
    hist, _metrics, result = simulate(sc, seed)
    cpu = time.process_time() - c0
    done = [ev.t for ev in hist.of("rdzv_done")]
    ranks = [ev.t for ev in hist.of("ranks_assigned")]
    last_start = max(h.start_at for h in sc.cluster.host_specs())
    if len(ranks) != hosts:
        why = result.stopped or ("its time limit" if result.hung else "its processes ended")
        seen = [(ev.t, int(ev.get("participants"))) for ev in hist.of("rdzv_participants")]
        course = ""
        if seen:
            peak = max(seen, key=lambda x: x[1])
            course = (f"; the round's participants peaked at {peak[1]:,} ({peak[0]:.0f} s) "
                      f"and were {seen[-1][1]:,} at {seen[-1][0]:.0f} s")
        raise Incomplete(
            f"{hosts:>6,} hosts (started over {last_start:.1f} s): NO round: {len(done):,} "
            f"agents finished the rendezvous and {len(ranks):,} got their ranks by "
            f"{result.end_time:.1f} s (virtual), when the run ended ({why}){course}; "
            f"{cpu:.1f} CPU s")
    return {"first_rdzv": min(done), "last_rdzv": max(done), "ranks": max(ranks), "cpu": cpu,
            "last_start": last_start}


class Incomplete(Exception):
    """A size at which not every agent got its ranks (the message says how far it got)."""


def main(argv: list[str] | None = None) -> int:
    """Print one line per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", help="sizes (default: the file's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-over", type=float, default=None, metavar="S",
                    help="hosts start evenly over S seconds (default: the file's start_over)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                    help="simulated seconds to run at most (default: the file's time_limit)")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="a torchelastic knob, e.g. keep_alive_interval=30 (repeatable)")
    args = ap.parse_args(argv)
    raw = load_yaml(SCENARIO, str(SCENARIO))
    assert isinstance(raw, dict)
    if args.time_limit is not None:
        raw["time_limit"] = args.time_limit
    for kv in args.knob:
        name, _, value = kv.partition("=")
        raw["protocol"]["knobs"][name] = float(value)
    failed = False
    for n in args.hosts or [int(raw["cluster"]["hosts"])]:
        try:
            f = measure(raw, n, args.seed, args.start_over)
        except Incomplete as exc:
            print(exc, flush=True)
            failed = True
            continue
        print(f"{n:>6,} hosts (started over {f['last_start']:.1f} s): rendezvous done "
              f"{f['first_rdzv']:.2f}-{f['last_rdzv']:.2f} s, every agent's ranks at "
              f"{f['ranks']:.2f} s (virtual; {f['ranks'] - f['last_start']:.2f} s after the "
              f"last host started); {f['cpu']:.1f} CPU s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
