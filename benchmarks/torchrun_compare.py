"""Real ``torchrun`` next to elastic-sim on the same faults: a thin caller of
``elastic-sim compare`` (which drives torchrun, see ``elastic_sim.real.torchrun``).

For each scenario it runs ``elastic-sim compare SCENARIO --modes ... --runs N`` and
collects every ``compare.json`` into ``results/torchrun_compare.json`` and a markdown
table, ``results/torchrun_compare.md``. Target: membership identical, recovery within 25%
of torchrun's median, on a quiet machine (the load average is recorded with each table).

    python benchmarks/torchrun_compare.py [--runs 3] [--modes sim,torchrun]
        [--scenarios worker_crash scale_down ...] [--sim-start-up SECONDS|measure]
        [--render] [--reuse DIR]

The markdown file keeps whatever follows its table (from its first ``## `` heading on):
the notes that explain each disagreement.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elastic_sim.cli import main as elastic_sim  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SCENARIOS = ("worker_crash", "scale_down")
MORE = ("store_host_crash", "rank0_host_crash", "preemption", "partition_heals",
        "partition_past_pg_timeout")
"""Further shipped scenarios the notes cover (``--scenarios`` names them)."""


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def markdown(docs: list[dict[str, Any]]) -> str:
    """One row per scenario, mode and fault: recovery and its split, membership, verdict."""
    head = ["scenario", "mode", "runs", "recovery s", "detect", "re-rendezvous", "start-up",
            "first step", "membership", "outcome", "load", "sim start-up", "agree"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for doc in docs:
        for mode in doc["modes"]:
            s = doc["summaries"][mode]
            recs = s["recoveries"] or {"—": {}}
            for fid, rec in recs.items():
                out.append("| " + " | ".join([
                    f"{doc['scenario']} ({fid})", mode, str(len(s["runs"])),
                    *(_fmt(rec.get(k)) for k in ("recovery_s", "detect", "rendezvous", "sync",
                                                 "first_step")),
                    " -> ".join(f"{len(m)}" for m in s["membership"]),
                    "/".join(sorted(set(s["outcomes"]))), doc.get("load", ""),
                    _start_up(doc) if mode == "sim" else "", "yes" if doc["agree"] else "no"])
                    + " |")
    return "\n".join(out) + "\n"


def _start_up(doc: dict[str, Any]) -> str:
    given = doc.get("sim_start_up")
    if not given:
        return "scenario's"
    return f"{given['seconds']:.2f} s ({given['source'].split(':')[0]})"


def notes(path: Path) -> str:
    """What follows the table in the markdown file now (kept when it is rewritten)."""
    if not path.exists():
        return ""
    text = path.read_text()
    at = text.find("\n## ")
    return "" if at < 0 else text[at:]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="3")
    p.add_argument("--modes", default="sim,torchrun")
    p.add_argument("--scenarios", nargs="+", choices=(*SCENARIOS, *MORE),
                   default=list(SCENARIOS))
    p.add_argument("--sim-start-up", default=None, metavar="SECONDS|measure",
                   help="passed to compare (the sim's worker start-up)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--render", action="store_true",
                   help="only rewrite the markdown from the JSON in --out")
    p.add_argument("--reuse", type=Path, default=None, metavar="DIR",
                   help="collect DIR/<scenario>/compare.json of compare runs made already")
    args = p.parse_args()
    if args.reuse is not None:
        docs = [json.loads((args.reuse / n / "compare.json").read_text())
                for n in args.scenarios]
        (args.out / "torchrun_compare.json").write_text(json.dumps(docs, indent=1) + "\n")
    elif not args.render:
        docs = []
        with tempfile.TemporaryDirectory(prefix="torchrun-compare-") as work:
            for name in args.scenarios:
                out = Path(work) / name
                extra = [] if args.sim_start_up is None else ["--sim-start-up",
                                                              args.sim_start_up]
                code = elastic_sim(["compare", f"scenarios/torchelastic/{name}.yaml",
                                    "--modes", args.modes, "--runs", args.runs,
                                    "--out", str(out), *extra])
                if code == 2:
                    return 2
                docs.append(json.loads((out / "compare.json").read_text()))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "torchrun_compare.json").write_text(json.dumps(docs, indent=1) + "\n")
    docs = json.loads((args.out / "torchrun_compare.json").read_text())
    text = markdown(docs)
    md = args.out / "torchrun_compare.md"
    md.write_text(text + notes(md))
    print(text)
    return 0 if all(d["agree"] for d in docs) else 1


if __name__ == "__main__":
    sys.exit(main())
