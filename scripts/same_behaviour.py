#!/usr/bin/env python3
"""Did a change keep behaviour? Run every shipped scenario (``scenarios/**/*.yaml``, the
``found/`` reproducers included) in the sim at two commits and compare what each wrote:
``trace.jsonl`` byte for byte, and ``summary.json`` whole but for its wall-clock time.

    python scripts/same_behaviour.py BASE [HEAD] [--seeds 0,7] [--jobs 2] [--fidelity fine]

BASE and HEAD are git revisions; HEAD defaults to the working tree as it is (uncommitted
changes included). Each side is built into a wheel and installed into a folder of its own,
then every scenario runs through that side's own command line (``python -m elastic_sim run
FILE --seed S --no-report``) from an empty directory, so neither side can import the
other's modules. A scenario runs with its own seed and, with ``--seeds``, those too. Prints
one line per difference and a total; exits 1 when anything differs, 0 when nothing does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.trees import ISOLATE, install_tree  # noqa: E402

VOLATILE = ("wall_s", "cpu_s")
"""summary.json fields that measure the machine, not the run."""


def checkout(rev: str | None, into: Path) -> Path:
    """The source tree of ``rev`` (None: the working tree, copied as it is)."""
    if rev is None:
        skip = shutil.ignore_patterns(".venv", "venv", "runs", "out", "build", "*.egg-info",
                                      "__pycache__", ".git", ".hypothesis", ".*_cache")
        shutil.copytree(ROOT, into, symlinks=True, ignore=skip)
        return into
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(into), rev], cwd=ROOT,
                   check=True, capture_output=True)
    return into


def run(site: Path, scenario: Path, seed: int | None, out: Path, fidelity: str = ""
        ) -> dict[str, Any]:
    """One sim run with the side installed in ``site``; its trace bytes and summary."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONHASHSEED": "0"}
    # The editable install of the checkout this runs from must not fill in modules a side
    # lacks: each side imports its own code only.
    isolated = (ISOLATE + "import runpy\n_sys.argv[0] = 'elastic-sim'\n"
                "runpy.run_module('elastic_sim', run_name='__main__')\n")
    argv = [sys.executable, "-c", isolated, "run", str(scenario), "--no-report",
            "--out", str(out), "--force"]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if fidelity:
        argv += ["--fidelity", fidelity]
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(argv, cwd=out.parent, env=env, capture_output=True, text=True,
                          check=False)
    trace = out / "trace.jsonl"
    summary_file = out / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else None
    if summary is not None:
        for key in VOLATILE:
            summary.pop(key, None)
    return {"exit": proc.returncode, "stderr": proc.stderr.strip()[-300:],
            "trace": trace.read_bytes() if trace.exists() else None, "summary": summary}


def without_knobs(trace: bytes | None) -> bytes | None:
    """``trace`` with its run_start's ``knobs`` left out (the rest byte for byte)."""
    if trace is None:
        return None
    lines = trace.split(b"\n")
    for i, line in enumerate(lines):
        if b'"kind":"run_start"' in line:
            ev = json.loads(line)
            ev["data"].pop("knobs", None)
            lines[i] = json.dumps(ev).encode()
            break
    return b"\n".join(lines)


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (paths, at most a few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path or '.'}: {str(a)[:80]} != {str(b)[:80]}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="the revision before the change")
    ap.add_argument("head", nargs="?", default=None,
                    help="the revision after it (default: the working tree)")
    ap.add_argument("--seeds", default="", help="more seeds per scenario, comma-separated")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", default="", help="scenario paths containing this text")
    ap.add_argument("--fidelity", default="", choices=["", "fast", "fine"],
                    help="run every scenario at this fidelity (default: each its own)")
    ap.add_argument("--ignore-knobs", action="store_true",
                    help="compare the traces without run_start's knobs (a change that adds a "
                         "knob writes its default into every run's run_start)")
    args = ap.parse_args()
    extra = [int(s) for s in args.seeds.split(",") if s.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="same-behaviour-"))
    worktrees = []
    try:
        sides = {}
        for label, rev in (("base", args.base), ("head", args.head)):
            src = checkout(rev, scratch / label / "src")
            if rev is not None:
                worktrees.append(src)
            install_tree(src, scratch / label)
            sides[label] = src
        names = sorted({p.relative_to(src / "scenarios").as_posix()
                        for src in sides.values() for p in (src / "scenarios").rglob("*.yaml")})
        names = [n for n in names if args.only in n]
        jobs = [(n, s) for n in names for s in [None, *extra]]
        print(f"{len(names)} scenarios, {len(jobs)} runs per side: {args.base} vs "
              f"{args.head or 'the working tree'}", flush=True)

        def both(job: tuple[str, int | None]) -> tuple[str, int | None, list[str]]:
            name, seed = job
            got = {}
            for label, src in sides.items():
                file = src / "scenarios" / name
                if not file.exists():
                    return name, seed, [f"missing on {label}"]
                out = scratch / label / "runs" / f"{name}-{seed}"
                got[label] = run(scratch / label / "site", file, seed, out, args.fidelity)
            a, b = got["base"], got["head"]
            diff = []
            if a["exit"] != b["exit"]:
                diff.append(f"exit {a['exit']} != {b['exit']} ({b['stderr'] or a['stderr']})")
            if args.ignore_knobs:
                a["trace"], b["trace"] = without_knobs(a["trace"]), without_knobs(b["trace"])
            if a["trace"] != b["trace"]:
                diff.append("trace.jsonl differs" if a["trace"] and b["trace"]
                            else "trace.jsonl missing on one side")
            diff += [f"summary{d}" for d in differences(a["summary"], b["summary"])][:5]
            return name, seed, diff

        bad = 0
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for name, seed, diff in pool.map(both, jobs):
                shown = f"{name} (seed {'own' if seed is None else seed})"
                if diff:
                    bad += 1
                    print(f"DIFFERS {shown}: " + "; ".join(diff), flush=True)
        print(f"{len(jobs) - bad} of {len(jobs)} runs identical (trace.jsonl bytes, "
              f"summary.json but {', '.join(VOLATILE)}); {bad} differ")
        return 1 if bad else 0
    finally:
        for wt in worktrees:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT,
                           capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
