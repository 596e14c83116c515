"""A seed sweep: one scenario run in the sim under many seeds, on one or more processes,
into a campaign report (``elastic-sim sweep SCENARIO --seeds 1-100 [--workers K]``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from rich.console import Console

from elastic_sim.errors import ScenarioError
from elastic_sim.junit import Suite, run_suite, write_junit
from elastic_sim.scenario import Scenario

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


def run_seed(sc: Scenario, seed: int, out_root: Path, file: str) -> SweepRun:
    """Run ``sc`` in the sim with ``seed`` into ``out_root/<name>-sim-s<seed>``."""
    from elastic_sim.runner import run_scenario

    out = out_root / f"{sc.name}-sim-s{seed}"
    r = run_scenario(sc, seed=seed, mode="sim", out_dir=out, file=file)
    return SweepRun(seed, r.passed, out, run_suite(r))


def sweep(sc: Scenario, seeds: Sequence[int], out_root: Path, *, workers: int = 1,
          file: str = "<scenario>",
          progress: Callable[[SweepRun], None] | None = None) -> list[SweepRun]:
    """Run every seed (``workers`` processes); the runs in seed order."""
    done: list[SweepRun] = []
    if workers == 1:
        for seed in seeds:
            done.append(run_seed(sc, seed, out_root, file))
            if progress:
                progress(done[-1])
        return done
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_seed, sc, seed, out_root, file) for seed in seeds]
        try:
            for fut in futures:
                done.append(fut.result())
                if progress:
                    progress(done[-1])
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return done


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    """``elastic-sim sweep``: exit 0 when every seed passes, 1 otherwise."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from elastic_sim.builtin import scenario_path
    from elastic_sim.reports.campaign import write_campaign_report
    from elastic_sim.scenario import load_scenario

    file = scenario_path(args.scenario)
    sc = load_scenario(file)
    seeds = parse_seeds(args.seeds)
    out = args.out or Path("runs") / f"sweep-{sc.name}"
    with Progress(TextColumn("sweeping {task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                  console=console, transient=True) as bar:
        task = bar.add_task(sc.name, total=len(seeds), failed=0)
        failed = 0

        def advance(r: SweepRun) -> None:
            nonlocal failed
            failed += not r.passed
            bar.update(task, advance=1, failed=failed)

        if args.ray is not None:
            from elastic_sim.ray_cases import sweep_on_ray

            runs = sweep_on_ray(sc, seeds, out, args.ray, str(file), progress=advance)
        else:
            runs = sweep(sc, seeds, out, workers=args.workers, file=str(file),
                         progress=advance)
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
