"""Real ``torchrun`` next to elastic-sim, on the same two faults and the same timeouts.

For each scenario it runs actual ``torchrun`` (c10d rendezvous, agents on loopback, the
store hosted by agent 0 through ``--rdzv-conf is_host=1``), injects the fault by SIGKILL,
and records the membership sequence (the worlds whose workers started, one per rendezvous
round, in order: node count, worker count, ranks, restart counts, steps) and the recovery
time: fault to the first training step of the new world, as elastic-sim's metrics define
it. Hosts, knobs (``--rdzv-conf`` timeouts, max restarts, monitor interval), step time and
the fault come from elastic-sim's scenario YAML, which it then runs in sim and in real mode
(medians over seeds and runs), reading the same two things from summary.json.

- worker_crash: SIGKILL one worker; its agent stays alive and restarts the group.
- scale_down: SIGKILL one agent that does not host the store, and its workers.

Every process this script starts carries a marker in its environment; whatever happens,
all of them are killed before the script returns (``torchrun_trial.cluster``).

    python benchmarks/torchrun_compare.py [--trials 3] [--sim-seeds 5] [--real-runs 3]
        [--scenarios worker_crash scale_down] [--modes sim real] [--render]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.torchrun_trial import (
    ROOT,
    VENV_BIN,
    Setup,
    setup_from_yaml,
    torchrun_trial,
)

RESULTS = ROOT / "benchmarks" / "results"
TARGET_MARGIN = 0.25
"""Target: recovery times within 25% of each other."""


SCENARIOS = {
    "worker_crash": "scenarios/torchelastic/worker_crash.yaml",
    "scale_down": "scenarios/torchelastic/scale_down.yaml",
}


# ------------------------------------------------------------------------------------------
# elastic-sim on the same scenario.
# ------------------------------------------------------------------------------------------


def elastic_sim_runs(yaml: str, mode: str, out: Path, seeds: int) -> dict[str, Any]:
    """``seeds`` runs (seeds 0, 1, ...): medians, plus every run's figures."""
    runs = [elastic_sim_run(yaml, mode, out / f"seed{k}", seed=k) for k in range(seeds)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0] if runs else {"error": "no runs"}

    def formed(r: dict[str, Any]) -> float | None:
        ph = r.get("phases") or {}
        d, z = ph.get("detect"), ph.get("rendezvous")
        return None if d is None or z is None else d + z

    rec = [r["recovery_s"] for r in ok if r.get("recovery_s") is not None]
    frm = [f for f in map(formed, ok) if f is not None]
    return {
        "runs": len(runs),
        "recovery_s": _median(rec),
        "recovery_s_runs": [r.get("recovery_s") for r in ok],
        "formed_s": _median(frm),
        "membership": sorted({str(r.get("membership")) for r in ok}),
        "outcomes": [r.get("outcome") for r in ok],
        "exit_codes": [r.get("exit_code") for r in ok],
        "errors": [r["error"] for r in runs if "error" in r],
        "each": runs,
    }


def elastic_sim_run(yaml: str, mode: str, out: Path, seed: int = 0,
                    timeout: float = 300.0) -> dict[str, Any]:
    """Run elastic-sim and read recovery and membership from its summary.json."""
    path = ROOT / yaml
    if not path.exists():
        return {"error": f"{yaml} does not exist (yet)"}
    cmd = [str(VENV_BIN / "elastic-sim"), "run", str(path), "--mode", mode, "--out", str(out),
           "--seed", str(seed), "--quiet", "--no-report"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"elastic-sim {mode} run exceeded {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    summary_path = out / "summary.json"
    if not summary_path.exists():
        return {"error": f"no summary.json (exit {proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-300:]}"}
    summary = json.loads(summary_path.read_text())
    metrics = summary.get("metrics", summary)
    recs = [r for r in metrics.get("recoveries", []) if r.get("recovery_s") is not None]
    return {
        "exit_code": proc.returncode,
        "wall_s": round(wall, 2),
        "recovery_s": recs[0]["recovery_s"] if recs else None,
        "phases": recs[0].get("phases") if recs else None,
        "membership": metrics.get("world_sizes"),
        "outcome": metrics.get("outcome"),
    }


# ------------------------------------------------------------------------------------------
# The table.
# ------------------------------------------------------------------------------------------


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def compare(setup: Setup, trials: int, work: Path, modes: list[str],
            es_runs: dict[str, int]) -> dict[str, Any]:
    """All trials of one scenario, torchrun and elastic-sim."""
    runs = []
    for k in range(trials):
        log_dir = work / f"{setup.name}-torchrun-{k}"
        log_dir.mkdir(parents=True)
        t = torchrun_trial(setup, log_dir)
        print(f"  torchrun trial {k}: recovery {_fmt(t.recovery_s)} s (new workers started "
              f"after {_fmt(t.workers_started_s)} s), membership "
              f"{t.membership}{'  ERROR ' + t.error if t.error else ''}", flush=True)
        runs.append(t)
    rec = [t.recovery_s for t in runs if t.recovery_s is not None]
    row: dict[str, Any] = {
        "scenario": setup.name,
        "setup": asdict(setup),
        "torchrun": {
            "recovery_s_median": _median(rec),
            "recovery_s": [t.recovery_s for t in runs],
            "workers_started_s": [t.workers_started_s for t in runs],
            "workers_started_s_median": _median(
                [t.workers_started_s for t in runs if t.workers_started_s is not None]),
            "membership": [t.membership for t in runs],
            "worlds": [[asdict(w) for w in t.worlds] for t in runs],
            "errors": [t.error for t in runs if t.error],
        },
    }
    for mode in modes:
        res = elastic_sim_runs(setup.yaml, mode, work / f"{setup.name}-{mode}",
                               es_runs[mode])
        print(f"  elastic-sim {mode}: recovery {res.get('recovery_s_runs')}, membership "
              f"{res.get('membership')}, outcomes {res.get('outcomes')} "
              f"{res.get('errors') or ''}", flush=True)
        row[f"elastic_sim_{mode}"] = res
        ref, got = row["torchrun"]["recovery_s_median"], res.get("recovery_s")
        res["within_25pct_of_torchrun"] = (
            None if ref is None or got is None else abs(got - ref) <= TARGET_MARGIN * ref)
    return row


def markdown(rows: list[dict[str, Any]], modes: list[str]) -> str:
    """The comparison as a markdown table: one line per scenario and run kind.

    Recovery splits at the new world's formation: for torchrun, fault to the first new
    worker process; for elastic-sim, its detect + rendezvous phases. The rest is start-up
    (interpreter, import torch, group init) and the first step."""
    head = ["scenario", "run", "recovery s", "fault → new world formed s",
            "start-up + first step s", "membership (nodes per world)", "within 25% of torchrun"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        tr = r["torchrun"]
        rec, spawn = tr["recovery_s_median"], tr["workers_started_s_median"]
        n = len(tr["recovery_s"])
        trials = ", ".join(_fmt(x) for x in tr["recovery_s"])
        memberships = sorted({str(m) for m in tr["membership"]})
        out.append("| " + " | ".join([
            r["scenario"], f"torchrun (median of {n}: {trials})", _fmt(rec), _fmt(spawn),
            _fmt(None if rec is None or spawn is None else rec - spawn),
            " / ".join(memberships), "—"]) + " |")
        for m in modes:
            es = r[f"elastic_sim_{m}"]
            if "error" in es:
                out.append(f"| {r['scenario']} | elastic-sim {m} | {es['error']} | | | | |")
                continue
            if "formed_s" in es:
                formed = es["formed_s"]
                each = ", ".join(_fmt(x) for x in es["recovery_s_runs"])
                label = f"elastic-sim {m} (median of {len(es['recovery_s_runs'])}: {each})"
                membership = " / ".join(es["membership"])
            else:  # one run, as the first results were recorded
                ph = es.get("phases") or {}
                formed = (None if ph.get("detect") is None or ph.get("rendezvous") is None
                          else ph["detect"] + ph["rendezvous"])
                label, membership = f"elastic-sim {m}", str(es.get("membership"))
            got = es.get("recovery_s")
            out.append("| " + " | ".join([
                r["scenario"], label, _fmt(got), _fmt(formed),
                _fmt(None if got is None or formed is None else got - formed),
                membership, str(es.get("within_25pct_of_torchrun"))]) + " |")
    return "\n".join(out) + "\n"


def header(doc: dict[str, Any]) -> str:
    """What was compared, when, and how busy the machine was."""
    load = doc["load"]
    return (f"torchrun {doc['torch']} (real, c10d, loopback) vs elastic-sim on the same "
            f"scenario YAMLs, {doc['started']}; load average before/after: "
            f"{load['before'][0]:.1f}/{load['after'][0]:.1f} on {load['cpus']} CPUs. "
            f"Recovery: fault to the first training step of the new world.\n\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS),
                   default=["worker_crash", "scale_down"])
    p.add_argument("--modes", nargs="*", default=["sim", "real"], choices=["sim", "real"])
    p.add_argument("--sim-seeds", type=int, default=5, help="elastic-sim sim runs (seeds)")
    p.add_argument("--real-runs", type=int, default=3, help="elastic-sim real runs")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--keep-logs", action="store_true", help="keep the per-run log dirs")
    p.add_argument("--render", action="store_true",
                   help="only rewrite the markdown from the JSON in --out")
    args = p.parse_args()
    if args.render:
        doc = json.loads((args.out / "torchrun_compare.json").read_text())
        text = header(doc) + markdown(doc["rows"], args.modes)
        (args.out / "torchrun_compare.md").write_text(text)
        print(text)
        return 0
    # A SIGTERM to this script unwinds through every cluster()'s cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="torchrun-compare-"))
    rows = []
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        for name in args.scenarios:
            print(f"{name}:", flush=True)
            rows.append(compare(setup_from_yaml(name, SCENARIOS[name]), args.trials, work,
                                args.modes, {"sim": args.sim_seeds, "real": args.real_runs}))
    finally:
        if args.keep_logs:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc = {"torch": _torch_version(), "started": started,
           "load": {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()},
           "rows": rows}
    text = header(doc) + markdown(rows, args.modes)
    print()
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "torchrun_compare.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "torchrun_compare.md").write_text(text)
    return 0


def _torch_version() -> str:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
