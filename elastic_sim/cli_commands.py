"""The command line's subcommand handlers: ``run`` (with its cluster and torchrun options),
``explore``, ``report``, ``validate`` and ``scenarios``, the exit codes they return and the
one-line stderr message they share with :func:`elastic_sim.cli.main`, which dispatches to
them (``sweep``, ``schema`` and ``compare`` are handled by their own modules).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.errors import ScenarioError

if TYPE_CHECKING:
    from rich.console import Console

    from elastic_sim.real.cluster.launchers import LaunchOptions
    from elastic_sim.spec import RunSpec

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _err(line: str) -> None:
    """One line on stderr, never wrapped (scripts grep it)."""
    print(" ".join(line.split()), file=sys.stderr)


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    import time

    from elastic_sim.console import print_report
    from elastic_sim.guards import RunGuard
    from elastic_sim.outdir import check_place, safe_component, staged
    from elastic_sim.pipeline import execute
    from elastic_sim.spec import compile_spec, load

    sc, file = load(args.scenario)  # a built-in name resolved here, once
    seed = sc.seed if args.seed is None else args.seed
    # runs/ is the tool's own: a rerun there replaces the earlier run's output.
    out = args.out or Path("runs") / safe_component(f"{sc.name}-{args.mode}-s{seed}")
    launch = _launch_options(args, file, out)
    spec = compile_spec(sc, file=file, seed=seed, mode=args.mode, fidelity=args.fidelity,
                        launch=launch, script=_script(args))  # refused here, before --out
    check_place(out)  # also where --launcher k8s writes its manifests
    if launch is not None and launch.launcher == "k8s":
        return _cmd_k8s(args, spec, out, console)
    if launch is not None and launch.launcher == "slurm":
        from elastic_sim.real.cluster.launchers import check_allocation

        check_allocation(spec.world, launch)
    with staged(out, force=args.force or args.out is None) as stage, \
            console.status(f"running {sc.name} ({args.mode})...") as status:
        report = execute(
            spec, stage, write_report=not args.no_report,
            progress=lambda msg: status.update(msg),
            guard=RunGuard(args.wall_limit, None if args.memory_limit is None
                           else args.memory_limit << 20,
                           since=time.monotonic() - getattr(args, "began", time.monotonic())),
        )
    report.out_dir = out
    report.report_files = [out / p.name for p in report.report_files]
    if report.report_error:
        _err(f"warning: reports not written ({report.report_error}); the verdict stands; "
             f"'elastic-sim report {out}' writes them")
    if args.junit is not None:
        from elastic_sim.junit import run_suite, write_junit

        write_junit(args.junit, [run_suite(report)])
    if args.quiet:
        console.print(("PASS" if report.passed else "FAIL") + f" {report.out_dir}")
    else:
        print_report(report, console, verbose=args.verbose)
    return report.exit_code


def _launch_options(args: argparse.Namespace, file: str, out: Path) -> LaunchOptions | None:
    """The cluster options of ``run``; None for the local launcher (whether the mode can
    place hosts so is its backend's to say, when the spec is compiled)."""
    if args.launcher == "local":
        return None
    from elastic_sim.real.cluster.launchers import LaunchOptions

    return LaunchOptions(launcher=args.launcher, bind=args.bind, port=args.port,
                         nodes=args.nodes, scenario_file=file, out=str(out), mode=args.mode)


def _cmd_k8s(args: argparse.Namespace, spec: RunSpec, out: Path, console: Console) -> int:
    """``--launcher k8s``: write the manifests that run the scenario on a cluster."""
    from elastic_sim.real.cluster.k8s import write_manifests

    path = write_manifests(Path(spec.file), spec.scenario, spec.seed, out / "k8s",
                           image=args.image, port=args.port or 29400)
    console.print(f"wrote {path}; run it with: kubectl apply -f {path}", markup=False)
    return 0


def _script(args: argparse.Namespace) -> tuple[str, ...]:
    """``--script`` and the arguments after ``--``: the user's training script (empty:
    the bundled worker); its backend says whether it takes one."""
    if args.script is None and not args.script_args:
        return ()
    if args.script is None:
        raise ScenarioError("--", "", "arguments after -- are the --script's; name the script")
    path = Path(args.script)
    if not path.is_file():
        raise ScenarioError("--script", "", f"{args.script}: no such file (expected a "
                            "training script)")
    return (str(path.resolve()), *args.script_args)


def _cmd_explore(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from elastic_sim.explore import explore, protocol_fault_types, space_for
    from elastic_sim.faults.around import SCALE, SHIFT, Around
    from elastic_sim.faults.model import FAULT_TYPES
    from elastic_sim.faults.schedule import GENERATORS
    from elastic_sim.findings import listing
    from elastic_sim.spec import load

    sc, _ = load(args.scenario)  # a file, or a built-in scenario's name
    if args.budget is None and args.time_s is None and not args.exhaustive:
        raise ScenarioError("explore", "", "expected --budget N, --time SECONDS or "
                            "--exhaustive")
    types = (protocol_fault_types(sc) if args.faults in (None, "all")
             else tuple(t for t in args.faults.split(",") if t))
    hosts = [h.name for h in sc.cluster.host_specs()]
    for t in types:
        if t not in GENERATORS:
            raise ScenarioError("--faults", "", f"cannot generate fault type {t!r}; expected "
                                f"some of: {', '.join(sorted(GENERATORS))}")
        need = FAULT_TYPES[t].device
        if need and need != sc.cluster.device:
            raise ScenarioError("--faults", "", f"a {t} fault needs cluster.device: {need}; "
                                f"{args.scenario} runs on {sc.cluster.device}")
    spare = tuple(h for h in args.spare.split(",") if h)
    for h in spare:
        if h not in hosts:
            raise ScenarioError("--spare", "", f"unknown host {h!r}; expected some of: "
                                + ", ".join(hosts[:8]))
    if args.time_s is not None and args.time_s <= 0:
        raise ScenarioError("--time", "", f"expected a positive number, got {args.time_s}")
    if args.horizon is not None and args.horizon < 0:
        raise ScenarioError("--horizon", "", f"expected seconds >= 0, got {args.horizon}")
    if args.max_duration is not None and args.max_duration <= 0:
        raise ScenarioError("--max-duration", "", f"expected a positive number, got "
                            f"{args.max_duration}")
    from elastic_sim.checks import CHECKS

    ignore = None if args.ignore is None else tuple(c for c in args.ignore.split(",") if c)
    names = [c.__name__ for c in CHECKS]
    for c in ignore or ():
        if c not in names:
            raise ScenarioError("--ignore", "", f"unknown check {c!r}; expected some of: "
                                + ", ".join(names))
    from elastic_sim.variation import check_varies, parse_vary, resolve_spares

    try:
        varies = [parse_vary(v) for v in args.vary]
    except ValueError as exc:
        raise ScenarioError("--vary", "", str(exc)) from None
    varies = resolve_spares(sc, varies)
    check_varies(sc, varies)
    own = () if args.replace else tuple(sc.fault_objects())
    shift, scale = args.around if args.around is not None else (SHIFT, SCALE)
    around = Around(own, shift, scale, retarget=shift > 0) if own else None
    space = space_for(sc, types=types, max_faults=args.max_faults,
                      max_duration=args.max_duration, spare=spare,
                      max_crashes=args.max_crashes, horizon=args.horizon,
                      triggers=not args.no_triggers, own_faults=around is not None)
    from elastic_sim.outdir import check_place, safe_component

    out = args.out or Path("runs") / safe_component(f"explore-{sc.name}-s{args.seed}")
    check_place(out)  # not /, home, a file or around the current directory
    from elastic_sim.campaign import terminate_raises
    from elastic_sim.ticker import Ticker

    with Progress(TextColumn("exploring {task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[found]} mechanisms"),
                  TimeElapsedColumn(), console=console, transient=True,
                  auto_refresh=False) as bar, \
            Ticker(f"explore {sc.name}", args.budget, deadline_s=args.time_s) as log, \
            terminate_raises():  # no refresh thread: workers can fork

        def progress(done: int, found: int) -> None:
            bar.update(task, completed=done, found=found, refresh=True)
            log.update(done, findings=found)

        task = bar.add_task(sc.name, total=args.budget, found=0)
        options = dict(seed=args.seed, budget=args.budget, time_s=args.time_s,
                       workers=args.workers, out_dir=out, ignore=ignore, ties=args.ties,
                       varies=varies, ray=args.ray, progress=progress, around=around,
                       swarm=not args.no_swarm, guided=not args.no_guide,
                       reports=args.reports)
        if args.exhaustive:
            from elastic_sim.exhaustive.search import explore_exhaustively

            res = explore_exhaustively(sc, space, depth=args.depth, **options)
        else:
            res = explore(sc, space, **options)
    if res.exhaustive is not None:
        _print_exhaustive(res.exhaustive, console)
    console.print(f"{res.cases} schedules and {res.shrink_runs} shrink runs in "
                  f"{res.wall_s:.1f} s ({res.per_minute:.0f} new schedules/min, "
                  f"{res.runs_per_minute:.0f} runs/min)"
                  + (f"; the scenario's {len(own)} own faults in every one" if around else ""),
                  markup=False)
    for line in listing(res.findings):
        console.print(line, markup=False, soft_wrap=True)
    from elastic_sim.explore_summary import stopping_hint

    console.print(f"coverage: {sum(1 for x in res.reached if x[0] == 's')} states, "
                  f"{sum(1 for x in res.reached if x[0] == 't')} transitions; "
                  f"{stopping_hint(res)[1]}", markup=False)
    console.print(f"summary: {out / 'explore.json'}"
                  + (f" ({res.unrendered} reports not rendered for want of time: "
                     "elastic-sim report DIR)" if res.unrendered else ""), markup=False)
    failing = res.failing(args.fail_on)
    if res.findings and not failing:
        console.print(f"none of the {len(res.findings)} breaks the protocol's own promise "
                      "(--fail-on any fails on them too)", markup=False)
    if args.junit is not None:
        from elastic_sim.junit import explore_suite, write_junit

        write_junit(args.junit, [explore_suite(res, CHECKS, args.fail_on)])
    return EXIT_FAIL if failing else EXIT_OK




def _print_exhaustive(ex: dict[str, Any], console: Console) -> None:
    """What an exhaustive enumeration did, one line per violating path."""
    console.print(f"exhaustive: {ex['states']} states, {ex['transitions']} transitions of "
                  f"{ex['world']} up to {ex['deepest']} decisions in {ex['seconds']:.1f} s"
                  + (" (stopped at the state limit)" if ex["truncated"] else "")
                  + f"; {len(ex['paths'])} violating paths", markup=False)
    for p in ex["paths"]:
        console.print(f"  {p['check']}: {p['why']} [{', '.join(p['faults']) or 'no fault'}] "
                      f"-> shown in the sim by {p['shown_in_sim']} of {p['cases']} replays",
                      markup=False)


def _cmd_report(args: argparse.Namespace, console: Console) -> int:
    from elastic_sim.outdir import add_to_manifest, held
    from elastic_sim.reports.campaign import find_runs, write_campaign_report
    from elastic_sim.reports.render import render_run_dir
    from elastic_sim.trace import RecordError

    root: Path = args.run_dir
    try:
        if (root / "trace.jsonl").is_file():
            with held(root):  # not while a run replaces it
                written = render_run_dir(root)
                add_to_manifest(root, [p.name for p in written])
        else:
            runs = find_runs(root) if root.is_dir() else []
            if not runs:
                raise ScenarioError(str(root), "", "not a run directory (no trace.jsonl) and "
                                    "no run directories (with summary.json) under it")
            written = write_campaign_report(runs, root)
    except RecordError as exc:
        raise ScenarioError(exc.file, exc.where, exc.message) from None
    for path in written:
        console.print(str(path), markup=False)
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    from elastic_sim.spec import load

    bad = 0
    for path in args.scenarios:
        try:
            sc, _ = load(path)  # a file, or a built-in scenario's name
        except ScenarioError as exc:  # every bad file is reported, not only the first
            _err(f"error: {exc}")
            bad += 1
            continue
        console.print(f"{path}: ok ({sc.protocol.label}, {len(sc.cluster.host_specs())} hosts, "
                      f"{len(sc.faults)} faults)", markup=False)
    if bad and len(args.scenarios) > 1:
        _err(f"{bad} of {len(args.scenarios)} files invalid")
    return EXIT_BAD_INPUT if bad else EXIT_OK


def _cmd_scenarios(args: argparse.Namespace, console: Console) -> int:
    from elastic_sim.builtin import builtin_dir
    from elastic_sim.scenario import load_scenario

    root = builtin_dir() if args.directory is None else Path(args.directory)
    if not root.is_dir():
        raise ScenarioError(str(root), "", "no such directory")
    for path in sorted(root.rglob("*.yaml")):
        # Built-ins by the name `run` takes; a directory's by their path.
        shown = (path.relative_to(root).with_suffix("").as_posix() if args.directory is None
                 else str(path))
        try:
            sc = load_scenario(path)
            first = " ".join(sc.description.split()).split(". ")[0]
            console.print(f"{shown}  [{sc.protocol.label}] {first}", markup=False,
                          soft_wrap=True)
        except ScenarioError as exc:
            console.print(f"{shown}  INVALID: {exc.message}", markup=False, soft_wrap=True)
    return EXIT_OK
