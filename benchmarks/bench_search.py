"""Today's search against the new one, on the generic campaign scenarios
(``scenarios/campaign/*_upstream_*.yaml``: no fault, upstream's settings, spare hosts, the
store away from rank 0): the same seed, the same time, one worker each, one after the
other, interleaved scenario by scenario (the machine is shared and noisy).

Both arms are read with this checkout's yardsticks, so they are measured alike:

- **mechanisms**: the distinct mechanisms each search reported
  (:class:`elastic_sim.mechanisms.Signature`); today's search reports violation signatures
  (check, witness kinds, fault types), so each of its reproducers' traces is read again
  for the mechanisms of its check and witness kinds;
- **time to first find** of each mechanism recorded in ``scenarios/found/``
  (``mechanisms.json``, matched exactly or by check, kinds and details): the wall seconds
  into the search when the case that first showed it was judged (today's search: its
  progress times, by the case its finding names);
- **abstract states** reached by the search's cases (:func:`elastic_sim.coverage.reach`,
  read in today's search by wrapping its case runner with this checkout's reader, loaded
  by path: plain modules) and the **fault types fired** in them;
- time taken against ``--time``, and the worker's idle share. Today's search does not
  keep to ``--time`` (it shrinks and writes every reproducer, report included, before it
  reads the next case): it is stopped at :data:`CAP` times it, keeping what it found.

    python benchmarks/bench_search.py [--time 600] [--seed 1] [--base a24a974]
        [--scenarios te_upstream_3_agents ...] [--out benchmarks/results/search]

The baseline is built once into ``--work`` (``benchmarks.trees.install``) and run with
``PYTHONPATH`` (``trees.ISOLATE``); each arm runs under ``nice -n 10``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.trees import ISOLATE, env_for, install  # noqa: E402

SCENARIOS = ("te_upstream_3_agents", "te_upstream_4_agents", "hvd_upstream_3_hosts",
             "hvd_upstream_4_hosts")

OLD_ARM = ISOLATE + r"""
import importlib.util, json, sys, time
from pathlib import Path
READERS, SCENARIO, SEED, TIME_S, OUT = sys.argv[1:6]

def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod

# This checkout's readers (plain modules over the trace), loaded into the baseline.
_load("elastic_sim.mechanisms", f"{READERS}/elastic_sim/mechanisms.py")
for p in ("torchelastic", "horovod", "static"):
    _load(f"elastic_sim.protocols.{p}.coverage", f"{READERS}/elastic_sim/protocols/{p}/coverage.py")
coverage = _load("elastic_sim.coverage", f"{READERS}/elastic_sim/coverage.py")

import elastic_sim.case_pool as cp
import elastic_sim.cases as cs
from elastic_sim.checks import run_checks
from elastic_sim.errors import ScenarioError
from elastic_sim.explore import explore, protocol_fault_types, space_for
from elastic_sim.spec import load

sc, _ = load(SCENARIO)
REACHED = set()

def run_case(sc, case, ignore=(), only=None):
    # the baseline's run_case, with this checkout's coverage reader beside it
    try:
        events, result = cs.case_run(sc, case)
    except ScenarioError:
        return cs.Outcome(case, [], {}, False)
    REACHED.update(coverage.reach(getattr(events, "raw", events), sc.protocol.name))
    sigs = cs.signatures_of(run_checks(events, only), ignore, events)
    return cs.Outcome(case, sorted(sigs), sigs, result.hung)

cp.run_case = run_case
space = space_for(sc, types=protocol_fault_types(sc), triggers=True)
times = {}
t0 = time.perf_counter()
import signal
from elastic_sim.campaign import terminate_raises
res = None
try:
    with terminate_raises():  # SIGTERM: stopped, what was found is kept (as Ctrl-C)
        res = explore(sc, space, seed=int(SEED), time_s=float(TIME_S), workers=1,
                      out_dir=Path(OUT), progress=lambda done, found: times.setdefault(
                          done, time.perf_counter() - t0))
except KeyboardInterrupt:
    pass
found = json.load(open(f"{OUT}/explore.json"))
json.dump({"wall_s": time.perf_counter() - t0, "cases": max(times, default=0),
           "case_s": times, "reached": sorted(REACHED), "stopped": res is None,
           "idle_s": found["worker_seconds"]["idle"]}, open(f"{OUT}/arm.json", "w"))
"""
CAP = 2.0
"""Today's search is stopped (SIGTERM, what it found kept) at this many times --time."""


def run_old(site: Path, readers: Path, scenario: Path, seed: int, time_s: float,
            out: Path) -> dict[str, Any]:
    """Today's search on ``scenario``; what it reports, read with the new search's readers
    (installed in ``readers``)."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", OLD_ARM, str(readers),
                             str(scenario), str(seed), str(time_s), str(out)],
                            env=env_for(site), cwd=out, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=CAP * time_s)
    except subprocess.TimeoutExpired:
        proc.terminate()  # what it found so far is written
        proc.wait()
    (out / "wall.json").write_text(json.dumps(time.perf_counter() - t0))
    return read_old(out)


def _wall(out: Path, fallback: float) -> float:
    """The arm's whole wall time, as run_old or run_new measured it."""
    path = out / "wall.json"
    return float(json.loads(path.read_text())) if path.is_file() else fallback


def read_old(out: Path) -> dict[str, Any]:
    """What today's search reported in ``out``, read with this checkout."""
    arm = json.loads((out / "arm.json").read_text())
    wall = _wall(out, arm["wall_s"])
    found = json.loads((out / "explore.json").read_text())
    case_s = {int(k): v for k, v in arm["case_s"].items()}
    firsts: dict[str, float] = {}
    for v in found["violations"]:
        at = case_s.get(int(v["found_at_case"]) + 1, arm["wall_s"])
        for m in _mechanisms_of(Path(v["run_dir"]), v["check"], v["where"]):
            firsts[m] = min(firsts.get(m, at), at)
    from elastic_sim.coverage import split

    parts = split(arm["reached"])
    return {"wall_s": wall, "cases": arm["cases"], "signatures": len(found["violations"]),
            "firsts": firsts, "states": len(parts["states"]),
            "fired": sorted({f.partition("@")[0] for f in parts["fired"]}),
            "stopped": arm.get("stopped", False),
            "idle_share": arm["idle_s"] / arm["wall_s"] if arm["wall_s"] else 0.0}


def _mechanisms_of(run_dir: Path, check: str, where: str) -> list[str]:
    """The mechanisms a reproducer's run shows of one check and witness shape."""
    from elastic_sim.checks import run_checks
    from elastic_sim.mechanisms import signatures_of
    from elastic_sim.trace import read_trace

    events = read_trace(run_dir / "trace.jsonl")
    sigs = signatures_of(run_checks(events, [check]), (), events)
    return [str(s) for s in sigs if s.where == where] or [str(s) for s in sigs]


NEW_ARM = ISOLATE + r"""
import sys
from elastic_sim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_new(site: Path, scenario: Path, seed: int, time_s: float, out: Path) -> dict[str, Any]:
    """The new search on ``scenario`` (the command line a user runs), installed in
    ``site``."""
    t0 = time.perf_counter()
    subprocess.run(["nice", "-n", "10", sys.executable, "-c", NEW_ARM, "explore",
                    str(scenario), "--time", str(time_s), "--seed", str(seed),
                    "--out", str(out)], env=env_for(site), cwd=out.parent, check=False,
                   capture_output=True)
    (out / "wall.json").write_text(json.dumps(time.perf_counter() - t0))
    return read_new(out)


def read_new(out: Path) -> dict[str, Any]:
    """What the new search reported in ``out``."""
    from elastic_sim.mechanisms import anonymous, parse

    found = json.loads((out / "explore.json").read_text())
    wall = _wall(out, found["wall_s"])
    firsts: dict[str, float] = {}
    for v in found["violations"]:  # named as this checkout names mechanisms (idempotent)
        m = str(anonymous(parse(v["mechanism"])))
        firsts[m] = min(firsts.get(m, v["found_s"]), v["found_s"])
    cov = found["coverage"]
    return {"wall_s": wall, "cases": found["cases"], "signatures": len(found["violations"]),
            "firsts": firsts, "states": cov["states"], "fired": sorted(cov["faults_fired"]),
            "idle_share": found["idle_share"]}


def recorded_firsts(protocol: str, firsts: dict[str, float]) -> dict[str, float]:
    """Each mechanism recorded in scenarios/found/ that a search met: when it first did."""
    from elastic_sim.mechanisms import known, parse

    reg = known()
    out: dict[str, float] = {}
    for text, at in firsts.items():
        rec = reg.match(protocol, parse(text))
        if rec is not None:
            out[rec.mechanism] = min(out.get(rec.mechanism, at), at)
    return out


def compare(name: str, old: dict[str, Any], new: dict[str, Any], time_s: float
            ) -> dict[str, Any]:
    """One scenario's row (``within``: mechanisms met within ``time_s``, the time asked
    for: today's search goes on long after it)."""
    from elastic_sim.scenario import load_scenario

    protocol = load_scenario(ROOT / "scenarios" / "campaign" / f"{name}.yaml").protocol.name
    ro = recorded_firsts(str(protocol), old["firsts"])
    rn = recorded_firsts(str(protocol), new["firsts"])
    both = sorted(set(ro) | set(rn))
    limit = max(old["wall_s"], new["wall_s"])
    # a recorded mechanism one search never met counts at that search's whole time
    to = [ro.get(m, old["wall_s"]) for m in both]
    tn = [rn.get(m, new["wall_s"]) for m in both]
    return {
        "scenario": name,
        "old": {k: v for k, v in old.items() if k != "firsts"} | {
            "mechanisms": len(old["firsts"]), "recorded_met": len(ro),
            "within": sum(1 for t in old["firsts"].values() if t <= time_s)},
        "new": {k: v for k, v in new.items() if k != "firsts"} | {
            "mechanisms": len(new["firsts"]), "recorded_met": len(rn),
            "within": sum(1 for t in new["firsts"].values() if t <= time_s)},
        "recorded": both,
        "median_first_s": {"old": statistics.median(to) if to else None,
                           "new": statistics.median(tn) if tn else None},
        "limit_s": limit,
    }


def table(rows: list[dict[str, Any]], time_s: float) -> str:
    """The Markdown table of the comparison."""
    head = ("| scenario | arm | cases | reported | mechanisms (met within --time) | recorded "
            "met | median first find of recorded (s) | states | fault types fired | wall (s) "
            f"for --time {time_s:g} | idle |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        for arm in ("old", "new"):
            a = r[arm]
            med = r["median_first_s"][arm]
            lines.append(f"| {r['scenario']} | {'today' if arm == 'old' else 'new'} | "
                         f"{a['cases']} | {a['signatures']} | {a['mechanisms']} "
                         f"({a['within']}) | "
                         f"{a['recorded_met']} of {len(r['recorded'])} | "
                         f"{'—' if med is None else f'{med:.0f}'} | {a['states']} | "
                         f"{len(a['fired'])} | {a['wall_s']:.0f} | "
                         f"{100 * a['idle_share']:.1f} % |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    """Run both arms on every scenario, print and write the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--base", default="a24a974")
    p.add_argument("--head", default="HEAD",
                   help="the new search's commit (built and installed like the baseline, so "
                        "edits to the checkout during the hour do not change it)")
    p.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    p.add_argument("--work", type=Path, default=Path("/tmp/bench-search"))
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search")
    p.add_argument("--reuse", action="store_true",
                   help="read the arms already run under --work instead of running them")
    args = p.parse_args()
    site = args.work / "base" / "site"
    if not site.is_dir() and not args.reuse:
        install(args.base, args.work / "base")
    head = args.work / "head" / "site"
    if not head.is_dir() and not args.reuse:  # built once per --work: the hour's new search
        head = install(args.head, args.work / "head")
    rows = []
    for name in args.scenarios:
        sc = ROOT / "scenarios" / "campaign" / f"{name}.yaml"
        work = args.work / name
        work.mkdir(parents=True, exist_ok=True)
        if args.reuse or (work / "new" / "wall.json").is_file():
            old, new = read_old(work / "old"), read_new(work / "new")
        elif (work / "old" / "arm.json").is_file():  # the old arm ran, the new did not
            old = read_old(work / "old")
            new = run_new(head, sc, args.seed, args.time, work / "new")
        else:
            old = run_old(site, head, sc, args.seed, args.time, work / "old")
            new = run_new(head, sc, args.seed, args.time, work / "new")
        rows.append(compare(name, old, new, args.time))
        print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(table(rows, args.time))
    print(table(rows, args.time))


if __name__ == "__main__":
    main()
