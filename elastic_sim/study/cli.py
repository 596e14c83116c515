"""``elastic-sim study SPEC``: load and check the study (exit 2 on bad input, nothing
written), run it (progress on stderr), print the summary, write ``study.json``,
``goodput.png`` and ``study.html``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from elastic_sim.outdir import safe_component


def cmd_study(args: argparse.Namespace, console: Console) -> int:
    """Run a study; 0 when it ran (a study has no verdict of its own)."""
    from elastic_sim.campaign import terminate_raises
    from elastic_sim.pipeline import writable
    from elastic_sim.study.cache import SampleCache, default_dir
    from elastic_sim.study.load import load_study
    from elastic_sim.study.report import print_study, write_study
    from elastic_sim.study.run import choose_method, run_study
    from elastic_sim.ticker import Ticker

    study = load_study(args.spec)
    choose_method(study, args.method)  # a method the study cannot use: exit 2, nothing written
    out = args.out or Path("runs") / f"study-{safe_component(study.name)}"
    writable(out)
    cache = SampleCache(None if args.no_cache else (args.cache or default_dir()))
    units = {"sampling": "samples", "direct": "runs", "composing": "settings"}
    with Ticker(f"study {study.name}", None, unit="samples") as log, terminate_raises():
        def progress(stage: str, done: int, total: int, note: str) -> None:
            log.label = f"study {study.name}: {stage}" + (f" ({note})" if note else "")
            log.unit, log.total = units.get(stage, stage), total
            log.update(done)

        result = run_study(study, method=args.method, workers=args.workers, ray=args.ray,
                           cache=cache, replications=args.replications, progress=progress)
    print_study(result, console)
    written = write_study(result, out)
    console.print(f"wrote {written[0]} ({', '.join(p.name for p in written[1:])}) in "
                  f"{result.wall_s:,.0f} s", markup=False, highlight=False)
    return 0
