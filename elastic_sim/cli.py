"""The command line: ``elastic-sim run | sweep | explore | report | validate | scenarios |
schema``.

Exit codes: 0 every check and expectation holds; 1 a violation or an unmet expectation;
2 bad input (named file, field and what was expected); 3 an internal error (its traceback
is written to a file the message names). A complete run
whose reports (report.html, plots) could not be written keeps its verdict's exit code and
prints a ``warning:`` line on stderr; ``elastic-sim report OUT`` writes them later.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from elastic_sim.errors import ScenarioError

if TYPE_CHECKING:
    from elastic_sim.real.cluster.launchers import LaunchOptions
    from elastic_sim.real.torchrun import Options as TorchrunOptions
    from elastic_sim.scenario import Scenario

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="elastic-sim",
        description="Simulation and fault-injection testbed for elastic training protocols.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario and check it")
    run.add_argument("scenario", help="scenario YAML file, or a built-in scenario's name")
    run.add_argument("--seed", type=_nonneg_int, default=None,
                     help="root seed (default: the scenario's seed)")
    run.add_argument("--mode", choices=["sim", "real", "torchrun"], default="sim",
                     help="sim: deterministic simulation; real: OS processes, TCPStore, Gloo; "
                          "torchrun: every host an actual torchrun agent (torchelastic)")
    run.add_argument("--script", default=None, metavar="TRAIN.PY",
                     help="--mode torchrun: the training script torchrun starts (its "
                          "arguments after --); default: the bundled worker")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default: runs/<scenario>-<mode>-s<seed>)")
    run.add_argument("--launcher", choices=["local", "netns", "slurm", "k8s", "env"],
                     default="local", help="real or torchrun mode: where the hosts run: all "
                     "on this machine (local), one network namespace each (netns), one Slurm task "
                     "each (slurm, inside an allocation), Kubernetes manifests to apply (k8s), "
                     "or nodes you start yourself (env)")
    run.add_argument("--bind", default="127.0.0.1",
                     help="interface the cluster coordinator listens on (default loopback)")
    run.add_argument("--port", type=_nonneg_int, default=0,
                     help="port of the cluster coordinator (default: any free one)")
    run.add_argument("--nodes", type=_pos_int, default=None,
                     help="number of cluster nodes (default: one per host, or the Slurm "
                     "allocation's tasks)")
    run.add_argument("--image", default="elastic-sim:latest",
                     help="--launcher k8s: the container image with elastic-sim and torch")
    run.add_argument("--fidelity", choices=["fast", "fine"], default=None,
                     help="sim: fast runs fault-free training stretches as one event each, "
                          "fine simulates every step (default: the scenario's, fast)")
    run.add_argument("--force", action="store_true",
                     help="replace an earlier run's output in --out (only the files "
                          "elastic-sim wrote are removed)")
    run.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    run.add_argument("--no-report", action="store_true",
                     help="skip report.html, the plots and trace.perfetto.json")
    _add_guards(run)
    _add_junit(run)
    rep = sub.add_parser("report", help="re-render the reports of a run (or of every run "
                                        "under a directory: a campaign report)")
    rep.add_argument("run_dir", type=Path, help="a run directory (holding trace.jsonl and "
                                                "summary.json), or a directory of runs")
    _add_explore(sub)
    _add_sweep(sub)
    from elastic_sim.compare.cli import add_compare

    add_compare(sub)
    val = sub.add_parser("validate", help="check scenario files without running them "
                                          "(every bad file is reported)")
    val.add_argument("scenarios", nargs="+")
    sub.add_parser("node", add_help=False,
                   help="cluster mode: run this machine's share of a real run (started once "
                   "per machine by Slurm, Kubernetes, mpirun...; see `elastic-sim node --help`)")
    ls = sub.add_parser("scenarios", help="list the scenarios in a directory (default: the "
                                          "built-in ones, by the name `run` takes)")
    ls.add_argument("directory", nargs="?", default=None)
    sch = sub.add_parser("schema", help="print the scenario file's JSON Schema (for editors: "
                                        "# yaml-language-server: $schema=<file>)")
    sch.add_argument("--faults-markdown", action="store_true",
                     help="print the fault types and their fields as a Markdown table instead")
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("elastic-sim")
    except PackageNotFoundError:  # run from a checkout that is not installed
        from elastic_sim import __version__

        return __version__


def _add_ray(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                     help="run the cases as Ray tasks: on a local Ray, or on the cluster at "
                          "ADDRESS (needs elastic-sim[ray])")


def _add_junit(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--junit", type=Path, default=None, metavar="FILE",
                     help="also write the verdicts as JUnit XML (a test case per check and "
                          "expectation, per run)")


def _add_sweep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sw = sub.add_parser("sweep", help="run a scenario over many seeds in the sim; a "
                                      "campaign report of all runs")
    sw.add_argument("scenario", help="scenario YAML file, or a built-in scenario's name")
    sw.add_argument("--seeds", required=True, metavar="SPEC",
                    help="seeds to run: a range 1-100, a list 1,5,9, or both 1-10,20")
    sw.add_argument("--workers", type=_pos_int, default=1, help="worker processes")
    sw.add_argument("--out", type=Path, default=None,
                    help="where the runs and campaign.html go (default: "
                         "runs/sweep-<scenario>)")
    _add_ray(sw)
    _add_junit(sw)


def _add_explore(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ex = sub.add_parser("explore", help="search fault schedules around a scenario in the sim; "
                                        "shrink each violation and write a reproducer")
    ex.add_argument("scenario", help="scenario YAML file (its hosts, protocol and knobs)")
    limit = ex.add_mutually_exclusive_group(required=True)
    limit.add_argument("--budget", type=_pos_int, help="number of schedules to run")
    limit.add_argument("--time", type=float, dest="time_s", metavar="SECONDS",
                       help="search for this many seconds of wall time")
    ex.add_argument("--workers", type=_pos_int, default=1, help="worker processes")
    ex.add_argument("--seed", type=_nonneg_int, default=0,
                    help="seed of the search itself (same seed, same findings)")
    ex.add_argument("--out", type=Path, default=None,
                    help="where reproducers and explore.json go (default: "
                         "runs/explore-<scenario>-s<seed>)")
    ex.add_argument("--max-faults", type=_nonneg_int, default=3,
                    help="most faults in one schedule")
    ex.add_argument("--ties", action="store_true",
                    help="also draw a tie seed per schedule: events due at the same time "
                         "from different sources run in a seeded order")
    ex.add_argument("--faults", default=None, metavar="TYPE,...|all",
                    help="fault types to draw; 'all': every type the protocol can meet "
                         "(the default)")
    ex.add_argument("--vary", action="append", default=[], metavar="PATH=LO..HI|A,B,...",
                    help="draw a knob (knobs.NAME), the store host (cluster.store_host), "
                         "the number of hosts (cluster.hosts) or of hosts beyond max_nodes "
                         "(cluster.spares) per schedule from this range or list; repeatable")
    ex.add_argument("--no-triggers", action="store_true",
                    help="faults fire at times only, never at the protocol's events")
    ex.add_argument("--max-duration", type=float, default=60.0,
                    help="longest hang or partition, seconds")
    ex.add_argument("--spare", default="", metavar="HOST,...",
                    help="hosts never crashed (e.g. the store host)")
    ex.add_argument("--horizon", type=float, default=None, metavar="SECONDS",
                    help="faults start within this run time (default: the fault-free run's "
                         "length)")
    ex.add_argument("--max-crashes", type=_nonneg_int, default=None,
                    help="most hosts one schedule crashes for good (the protocol's contract)")
    ex.add_argument("--ignore", default=None, metavar="CHECK,...",
                    help="checks not to report (default: the scenario's "
                         "expect.violated_checks)")
    _add_ray(ex)
    _add_junit(ex)


def _add_guards(cmd: argparse.ArgumentParser) -> None:
    from elastic_sim.guards import DEFAULT_WALL_LIMIT, MEMORY_SHARE

    cmd.add_argument("--wall-limit", type=_pos_float, default=DEFAULT_WALL_LIMIT,
                     metavar="SECONDS", help="end the run after this much wall time, keeping "
                     f"its trace (default {DEFAULT_WALL_LIMIT:g})")
    cmd.add_argument("--memory-limit", type=_pos_int, default=None, metavar="MIB",
                     help="end the run when it holds more memory than this, keeping its "
                     f"trace (default {MEMORY_SHARE * 100:.0f}%% of physical memory)")


def _pos_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return value


def _pos_int(text: str) -> int:
    value = _nonneg_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``elastic-sim`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["node"]:  # the node entry owns its arguments (and its exit codes)
        from elastic_sim.real.cluster.node import main as node_main

        return node_main(argv[1:])
    argv = list(argv)
    script_args: list[str] = []
    if "--" in argv:  # what follows is the user's script's command line
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1:]
    args = _parser().parse_args(argv)
    args.script_args = script_args
    # Not a terminal (CI logs, pipes): wide enough that tables do not wrap.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    try:
        if args.command == "run":
            return _cmd_run(args, console)
        if args.command == "validate":
            return _cmd_validate(args, console)
        if args.command == "explore":
            return _cmd_explore(args, console)
        if args.command == "report":
            return _cmd_report(args, console)
        if args.command == "sweep":
            from elastic_sim.sweep import cmd_sweep

            return cmd_sweep(args, console)
        if args.command == "schema":
            from elastic_sim.schema import fault_reference, schema_text

            print(fault_reference() if args.faults_markdown else schema_text())
            return EXIT_OK
        if args.command == "compare":
            from elastic_sim.compare.cli import cmd_compare

            return cmd_compare(args, console)
        return _cmd_scenarios(args, console)
    except ScenarioError as exc:
        _err(f"error: {exc}")
        return EXIT_BAD_INPUT

    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as exc:  # an internal error still gets one line, not a traceback
        if type(exc).__name__ == "NotInAllocation":  # the sbatch script goes to stdout
            why, _, script = str(exc).partition("\n\n")
            print(script, end="")
            _err(f"error: {why}")
            return EXIT_BAD_INPUT
        if type(exc).__name__ == "ClusterError":
            _err(f"error: cluster run: {exc}")
            return EXIT_BAD_INPUT
        if args.debug:
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc} (traceback: "
             f"{_save_traceback()})")
        return EXIT_INTERNAL


def _save_traceback() -> str:
    """Write the current exception's traceback to a fresh file; its path."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix="elastic-sim-traceback-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as fh:
        traceback.print_exc(file=fh)
    return name


def _err(line: str) -> None:
    """One line on stderr, never wrapped (scripts grep it)."""
    print(" ".join(line.split()), file=sys.stderr)


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    from elastic_sim.builtin import scenario_path
    from elastic_sim.console import print_report
    from elastic_sim.guards import RunGuard
    from elastic_sim.outdir import check_place, safe_component, staged
    from elastic_sim.runner import refuse_unsupported, run_scenario
    from elastic_sim.scenario import load_scenario

    file = scenario_path(args.scenario)
    sc = load_scenario(file)
    if args.fidelity is not None:
        sc = sc.model_copy(update={"fidelity": args.fidelity})
    refuse_unsupported(sc, sc.fault_objects(), args.mode, str(file))  # before --out
    seed = sc.seed if args.seed is None else args.seed
    # runs/ is the tool's own: a rerun there replaces the earlier run's output.
    out = args.out or Path("runs") / safe_component(f"{sc.name}-{args.mode}-s{seed}")
    check_place(out)  # also where --launcher k8s writes its manifests
    launch = _launch_options(args, out)
    if launch is not None and launch.launcher == "k8s":
        return _cmd_k8s(args, sc, seed, out, console)
    if launch is not None and launch.launcher == "slurm":
        from elastic_sim.real.cluster.launchers import check_allocation
        from elastic_sim.runner import build_world

        check_allocation(build_world(sc, seed, "real"), launch)
    options = _torchrun_options(args)
    with staged(out, force=args.force or args.out is None) as stage, \
            console.status(f"running {sc.name} ({args.mode})...") as status:
        report = run_scenario(
            sc, seed=seed, mode=args.mode, out_dir=stage, file=str(file),
            progress=lambda msg: status.update(msg), write_report=not args.no_report,
            launch=launch,
            guard=RunGuard(args.wall_limit, None if args.memory_limit is None
                           else args.memory_limit << 20),
            torchrun=options,
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
        print_report(report, console)
    return report.exit_code


def _launch_options(args: argparse.Namespace, out: Path) -> LaunchOptions | None:
    """The cluster options of ``run``; None for the local launcher."""
    if args.launcher == "local":
        return None
    if args.mode == "sim" or (args.mode == "torchrun" and args.launcher == "k8s"):
        need = "--mode real" if args.launcher == "k8s" else "--mode real or torchrun"
        raise ScenarioError("--launcher", "", f"--launcher {args.launcher} needs {need}")
    from elastic_sim.real.cluster.launchers import LaunchOptions

    return LaunchOptions(launcher=args.launcher, bind=args.bind, port=args.port,
                         nodes=args.nodes, scenario_file=args.scenario, out=str(out),
                         mode=args.mode)


def _cmd_k8s(args: argparse.Namespace, sc: Scenario, seed: int, out: Path,
             console: Console) -> int:
    """``--launcher k8s``: write the manifests that run the scenario on a cluster."""
    from elastic_sim.real.cluster.k8s import write_manifests

    path = write_manifests(Path(args.scenario), sc, seed, out / "k8s", image=args.image,
                           port=args.port or 29400)
    console.print(f"wrote {path}; run it with: kubectl apply -f {path}", markup=False)
    return 0


def _torchrun_options(args: argparse.Namespace) -> TorchrunOptions | None:
    """``--script`` and the arguments after ``--``, for ``--mode torchrun`` only."""
    if args.script is None and not args.script_args:
        return None
    if args.mode != "torchrun":
        raise ScenarioError("--script", "", "a training script runs under --mode torchrun only")
    if args.script is None:
        raise ScenarioError("--", "", "arguments after -- are the --script's; name the script")
    path = Path(args.script)
    if not path.is_file():
        raise ScenarioError(args.script, "", "no such training script (expected a file)")
    from elastic_sim.real.torchrun import Options

    return Options(script=(str(path.resolve()), *args.script_args))


def _cmd_explore(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from elastic_sim.builtin import scenario_path
    from elastic_sim.explore import explore, protocol_fault_types, space_for
    from elastic_sim.faults.schedule import GENERATORS
    from elastic_sim.scenario import load_scenario

    sc = load_scenario(scenario_path(args.scenario))
    types = (protocol_fault_types(sc) if args.faults in (None, "all")
             else tuple(t for t in args.faults.split(",") if t))
    hosts = [h.name for h in sc.cluster.host_specs()]
    for t in types:
        if t not in GENERATORS:
            raise ScenarioError("--faults", "", f"cannot generate fault type {t!r}; expected "
                                f"some of: {', '.join(sorted(GENERATORS))}")
    spare = tuple(h for h in args.spare.split(",") if h)
    for h in spare:
        if h not in hosts:
            raise ScenarioError("--spare", "", f"unknown host {h!r}; expected some of: "
                                + ", ".join(hosts[:8]))
    if args.time_s is not None and args.time_s <= 0:
        raise ScenarioError("--time", "", f"expected a positive number, got {args.time_s}")
    if args.horizon is not None and args.horizon < 0:
        raise ScenarioError("--horizon", "", f"expected seconds >= 0, got {args.horizon}")
    if args.max_duration <= 0:
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
    space = space_for(sc, types=types, max_faults=args.max_faults,
                      max_duration=args.max_duration, spare=spare,
                      max_crashes=args.max_crashes, horizon=args.horizon,
                      triggers=not args.no_triggers)
    from elastic_sim.outdir import check_place, safe_component

    out = args.out or Path("runs") / safe_component(f"explore-{sc.name}-s{args.seed}")
    check_place(out)  # not /, home, a file or around the current directory
    with Progress(TextColumn("exploring {task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[found]} violations"),
                  TimeElapsedColumn(), console=console, transient=True,
                  auto_refresh=False) as bar:  # no refresh thread: workers can fork
        task = bar.add_task(sc.name, total=args.budget, found=0)
        res = explore(sc, space, seed=args.seed, budget=args.budget, time_s=args.time_s,
                      workers=args.workers, out_dir=out, ignore=ignore, ties=args.ties,
                      varies=varies,
                      ray=args.ray,
                      progress=lambda done, found: bar.update(task, completed=done,
                                                              found=found, refresh=True))
    console.print(f"{res.cases} schedules and {res.shrink_runs} shrink runs in "
                  f"{res.wall_s:.1f} s ({res.per_minute:.0f} new schedules/min, "
                  f"{res.runs_per_minute:.0f} runs/min), "
                  f"{len(res.findings)} distinct violations", markup=False)
    for f in res.findings:
        state = "reproduced" if f.reproduced else "NOT reproduced"
        console.print(f"VIOLATION [{STANDING.get(f.standing, f.standing)}] {f.signature}: "
                      f"{f.message}", markup=False)
        console.print(f"  shrunk {len(f.original)} -> {len(f.faults)} faults in "
                      f"{f.shrink_runs} runs; {state}: {f.reproducer}", markup=False)
    console.print(f"summary: {out / 'explore.json'}", markup=False)
    if args.junit is not None:
        from elastic_sim.junit import explore_suite, write_junit

        write_junit(args.junit, [explore_suite(res, CHECKS)])
    return EXIT_FAIL if res.findings else EXIT_OK


STANDING = {"broken_promise": "broke its own promise",
            "weak_spot": "upstream's known weak spot",
            "outside_contract": "outside the contract's fault assumptions"}
"""How a finding stands against the protocol's contract, in words."""


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
    from elastic_sim.scenario import load_scenario

    bad = 0
    for path in args.scenarios:
        try:
            sc = load_scenario(path)
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


if __name__ == "__main__":
    sys.exit(main())
