"""A seed sweep: one scenario run in the sim under many seeds, on one or more processes,
into a campaign report (``elastic-sim sweep SCENARIO --seeds 1-100 [--workers K]``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from elastic_sim.errors import ScenarioError
from elastic_sim.junit import Suite, run_suite, where, write_junit

if TYPE_CHECKING:
    from elastic_sim.spec import RunSpec

MAX_SEEDS = 1_000_000


@dataclass(frozen=True)
class SweepRun:
    """What a sweep keeps of one seed's run."""

    seed: int
    passed: bool
    out_dir: Path
    suite: Suite
    """Its checks and expectations as test cases."""

    @property
    def failures(self) -> list[str]:
        """The violated checks and unmet expectations, one line each."""
        return [f"{c.name}: {c.failure}" for c in self.suite.cases if c.failure is not None]


def parse_seeds(spec: str, where: str = "--seeds") -> list[int]:
    """``"1-100"``, ``"1,5,9"`` or ``"1-10,20"`` -> the seeds in order, each once."""
    seeds: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi if dash else lo)
        except ValueError:
            raise ScenarioError(where, "", f"expected seeds like 1-100 or 1,5,9, got "
                                f"{spec!r}") from None
        if first < 0 or last < first:
            raise ScenarioError(where, "", f"expected a range low-high of seeds >= 0, got "
                                f"{part!r}")
        seeds.extend(range(first, last + 1))
        if len(seeds) > MAX_SEEDS:
            raise ScenarioError(where, "", f"at most {MAX_SEEDS} seeds, got more")
    return list(dict.fromkeys(seeds))


def run_seed(spec: RunSpec, seed: int, out: Path) -> tuple[bool, Suite]:
    """Run ``spec`` with ``seed`` into ``out`` (a campaign task); whether it passed, and
    its checks and expectations as test cases."""
    from elastic_sim.pipeline import execute

    report = execute(spec.rerun(seed), out)
    return report.passed, run_suite(report)


def sweep(spec: RunSpec, seeds: Sequence[int], out_root: Path, *, workers: int = 1,
          ray: str | None = None,
          progress: Callable[[SweepRun], None] | None = None) -> list[SweepRun]:
    """Run ``spec`` once per seed, each into ``out_root/<name>-sim-s<seed>`` (on
    ``workers`` processes, or on Ray); the runs in seed order, each passed to
    ``progress`` as it and those before it are done."""
    from elastic_sim.campaign import Executor

    def out_of(job: tuple[int]) -> Path:
        return out_root / f"{spec.scenario.name}-{spec.mode}-s{job[0]}"

    done: list[SweepRun] = []
    jobs = [(seed,) for seed in seeds]
    with Executor(spec, workers, ray) as executor:
        for job, (passed, suite) in zip(jobs, executor.map(run_seed, jobs, out_dirs=out_of),
                                        strict=False):
            suite.out = where(out_of(job))  # here, not where a remote worker wrote it
            done.append(SweepRun(job[0], passed, out_of(job), suite))
            if progress:
                progress(done[-1])
    return done


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """``elastic-sim sweep``: exit 0 when every seed passes, 1 otherwise."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from elastic_sim.reports.campaign import write_campaign_report
    from elastic_sim.spec import compile_spec

    spec = compile_spec(args.scenario)  # a built-in name resolved here, once
    sc = spec.scenario
    seeds = parse_seeds(args.seeds)
    out = args.out or Path("runs") / f"sweep-{sc.name}"
    from elastic_sim.campaign import terminate_raises
    from elastic_sim.ticker import Ticker

    with Progress(TextColumn("sweeping {task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                  console=console, transient=True) as bar, \
            Ticker(f"sweep {sc.name}", len(seeds), unit="runs") as log, terminate_raises():
        task = bar.add_task(sc.name, total=len(seeds), failed=0)
        failed = done = 0

        def advance(r: SweepRun) -> None:
            nonlocal failed, done
            failed += not r.passed
            done += 1
            bar.update(task, advance=1, failed=failed)
            log.update(done, failed=failed)

        runs = sweep(spec, seeds, out, workers=args.workers, ray=args.ray, progress=advance)
    bad = [r for r in runs if not r.passed]
    for r in bad:
        console.print(f"FAIL seed {r.seed}: {r.out_dir}", markup=False)
        for line in r.failures:
            console.print(f"  {line}", markup=False)
    written = write_campaign_report([r.out_dir for r in runs], out)
    console.print(f"{len(runs)} runs: {len(runs) - len(bad)} passed, {len(bad)} failed; "
                  f"campaign: {written[0]}", markup=False)
    if args.junit is not None:
        write_junit(args.junit, [r.suite for r in runs])
    return 1 if bad else 0
