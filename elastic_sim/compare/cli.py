"""``elastic-sim compare SCENARIO [--modes sim,real,torchrun] [--runs N] [--out DIR]
[--tolerance 0.25]``: exit 0 when every mode agrees, 1 when not, 2 on bad input."""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.errors import ScenarioError

if TYPE_CHECKING:
    from rich.console import Console

    from elastic_sim.backends import Backend


def add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``compare`` subcommand's arguments."""
    cp = sub.add_parser("compare", help="run a scenario under several modes (sim, real, "
                                        "torchrun) and show where they disagree")
    cp.add_argument("scenario", help="scenario YAML file")
    cp.add_argument("--modes", default="sim,real,torchrun",
                    help="modes to run, comma-separated (default: sim,real,torchrun)")
    cp.add_argument("--runs", default="1", help="runs per mode (sim: seeds seed, seed+1, "
                                                "...; other modes: repetitions)")
    cp.add_argument("--seed", default=None, help="first seed (default: the scenario's)")
    cp.add_argument("--out", type=Path, default=None,
                    help="output directory (default: runs/compare-<scenario>)")
    cp.add_argument("--tolerance", default="0.25",
                    help="largest relative difference of a time or of lost steps that still "
                         "agrees (0.25: ±25%%)")
    cp.add_argument("--slack", default="0.5", metavar="SECONDS",
                    help="times may also differ by this many seconds (default 0.5: "
                         "scheduling noise on short phases)")
    cp.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run the runs as Ray tasks: a local Ray, or the cluster at ADDRESS "
                         "(needs elastic-sim[ray]); real and torchrun runs one at a time")
    cp.add_argument("--script", default=None, metavar="TRAIN.PY",
                    help="torchrun mode's training script (its arguments after --)")
    cp.add_argument("--sim-start-up", default=None, metavar="SECONDS|measure|reference",
                    help="the sim's worker start-up (cluster.process_start) for this "
                         "comparison: seconds; 'measure' (every host's interpreter "
                         "importing torch at once, here, before the runs); 'reference' "
                         "(the median restarted worker's start-up in the reference mode's "
                         "runs, which then run first); default: the scenario's")
    cp.add_argument("--launcher", choices=["local", "netns", "slurm", "env"], default="local",
                    help="where real and torchrun mode run their hosts (as for run; slurm: "
                         "inside an allocation, e.g. under salloc); the sim runs here")
    cp.add_argument("--bind", default="127.0.0.1",
                    help="interface the cluster coordinator listens on (default loopback)")
    cp.add_argument("--nodes", default=None,
                    help="number of cluster nodes (default: one per host, or the Slurm "
                         "allocation's tasks)")


def _number(flag: str, text: str, kind: type[int] | type[float], low: float) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise ScenarioError(flag, "", f"expected a {kind.__name__} >= {low:g}, got "
                            f"{text!r}") from None
    if value < low or value != value:
        raise ScenarioError(flag, "", f"expected a {kind.__name__} >= {low:g}, got {text!r}")
    return value


def _launch(args: argparse.Namespace, file: str, modes: list[str], out: Path) -> Any:
    """The cluster options of the modes that place hosts (None: on this machine)."""
    if args.launcher == "local":
        return None
    from elastic_sim.backends import backend

    if all(backend(m, "--modes").launchers == ("local",) for m in modes):
        raise ScenarioError("--launcher", "", f"--launcher {args.launcher} places the hosts "
                            "of a mode that runs them on machines (real, torchrun); add one "
                            "to --modes")
    if args.ray is not None:
        raise ScenarioError("--launcher", "", f"--launcher {args.launcher} and --ray both "
                            "place the runs; choose one")
    from elastic_sim.real.cluster.launchers import LaunchOptions

    nodes = None if args.nodes is None else _number("--nodes", args.nodes, int, 1)
    command = (f"elastic-sim compare {shlex.quote(file)} --modes {','.join(modes)} "
               f"--runs {args.runs} --launcher {args.launcher} --bind 0.0.0.0 "
               f"--out {shlex.quote(str(out))}")
    return LaunchOptions(launcher=args.launcher, bind=args.bind, nodes=nodes,
                         scenario_file=file, out=str(out), command=command)


def _sim_start_up(text: str | None, sc: Any, modes: list[str],
                  console: Console) -> dict[str, Any] | None:
    """The sim's worker start-up for this comparison (None: the scenario's), with where
    it came from; printed before anything runs."""
    if text is None:
        return None
    if "sim" not in modes:
        raise ScenarioError("--sim-start-up", "", "sets the sim's start-up; add sim to --modes")
    if text == "reference":
        from elastic_sim.backends import backend
        from elastic_sim.compare.collect import reference_of

        ref = reference_of(modes)
        if backend(ref).deterministic:
            raise ScenarioError("--sim-start-up", "", "'reference' takes the start-up of a "
                                "mode that measures it (real, torchrun); add one to --modes")
        return {"seconds": "reference", "scenario": sc.cluster.process_start,
                "source": f"the median restarted worker's start-up in {ref} mode's runs"}
    if text == "measure":
        from elastic_sim.compare.startup import measure

        hosts = len(sc.cluster.host_specs())
        seconds = measure(hosts)
        source = (f"measured here: {hosts} interpreters importing torch at once, median of "
                  "2 rounds")
    else:
        seconds = _number("--sim-start-up", text, float, 0.0)
        source = "given on the command line"
    console.print(f"sim worker start-up: {seconds:.3f} s ({source}; the scenario's: "
                  f"{sc.cluster.process_start} s)", markup=False)
    return {"seconds": seconds, "source": source, "scenario": sc.cluster.process_start}


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    """Run, judge, print and write the comparison."""
    from elastic_sim.cli_commands import _script
    from elastic_sim.compare.collect import (
        compile_modes,
        judge,
        parse_modes,
        reference_start_up,
        run_modes,
    )
    from elastic_sim.compare.render import print_comparison, write_outputs
    from elastic_sim.spec import load as load_scenario

    modes = parse_modes(args.modes)
    runs = _number("--runs", args.runs, int, 1)
    tolerance = _number("--tolerance", args.tolerance, float, 0.0)
    slack = _number("--slack", args.slack, float, 0.0)
    sc, file = load_scenario(args.scenario)  # a built-in name resolved here, once
    seed = sc.seed if args.seed is None else _number("--seed", args.seed, int, 0)
    script = _script(args)
    if script and not any(s.takes_script for s in _backends(modes)):
        raise ScenarioError("--script", "", "a training script runs under "
                            + " or ".join(b.name for b in _backends() if b.takes_script)
                            + " mode; add it to --modes")
    out: Path = args.out or Path("runs") / f"compare-{sc.name}"
    launch = _launch(args, file, modes, out)
    specs = compile_modes(sc, file, modes, seed, script, launch)  # refused before any run
    if launch is not None and launch.launcher == "slurm":
        from elastic_sim.real.cluster.launchers import check_allocation

        check_allocation(next(s.world for s in specs.values() if s.launch), launch)
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    start_up = _sim_start_up(args.sim_start_up, sc, modes, console)
    given: float | str | None = None if start_up is None else start_up["seconds"]
    from elastic_sim.campaign import terminate_raises
    from elastic_sim.ticker import Ticker

    with console.status(f"comparing {sc.name}...") as status, \
            Ticker(f"compare {sc.name}", runs * len(modes), unit="runs") as log, \
            terminate_raises():

        def progress(msg: str) -> None:
            status.update(f"{sc.name}: {msg}")
            log.update(log.done + 1)

        summaries = run_modes(specs, runs, seed, out, progress=progress, ray=args.ray,
                              sim_start_up=given)
    comparison = judge(sc, modes, summaries, tolerance, slack)
    if start_up is not None and start_up["seconds"] == "reference":
        value = reference_start_up(summaries[comparison.reference])
        start_up["seconds"] = sc.cluster.process_start if value is None else value
        if value is None:
            start_up["source"] += " (no restarted worker there: the scenario's)"
        console.print(f"sim worker start-up: {start_up['seconds']:.3f} s ({start_up['source']})",
                      markup=False)
    load = f"{load_before[0]:.1f}/{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    print_comparison(comparison, console)
    console.print(f"load average before/after: {load}", markup=False)
    extra: dict[str, Any] = {"started": started, "load": load}
    if start_up is not None:
        extra["sim_start_up"] = start_up
    for path in write_outputs(comparison, out, extra):
        console.print(str(path), markup=False)
    return 0 if comparison.agree else 1


def _backends(modes: list[str] | None = None) -> list[Backend]:
    """The backends of ``modes`` (None: every registered one)."""
    from elastic_sim.backends import BACKENDS

    return [b for n, b in BACKENDS.items() if modes is None or n in modes]
