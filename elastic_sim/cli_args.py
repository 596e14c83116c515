"""The command line's arguments: the ``elastic-sim`` parser with every subcommand and its
options (in the order ``--help`` lists them) and the argument types that check numbers.
:mod:`elastic_sim.cli` parses with it and dispatches.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="elastic-sim",
        description="Simulation and fault-injection testbed for elastic training protocols.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="show program's version number and exit")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario and check it")
    run.add_argument("scenario", help="scenario YAML file, or a built-in scenario's name")
    run.add_argument("--seed", type=_nonneg_int, default=None,
                     help="root seed (default: the scenario's seed)")
    from elastic_sim.modes import MODES  # not the backends: --help imports no simulator

    # No choices here: a registered backend is a mode too (checked when the spec compiles).
    run.add_argument("--mode", default="sim", metavar="MODE",
                     help="; ".join(f"{n}: {b.summary}" for n, b in MODES.items())
                     + " (or any backend a plugin registered)")
    run.add_argument("--script", default=None, metavar="TRAIN.PY",
                     help="--mode " + "/".join(n for n, b in MODES.items() if b.takes_script)
                     + ": the training script to start (its arguments after --); default: "
                     "the bundled worker")
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
                     help="--launcher k8s: the container image with elastic-sim and torch "
                     "(the repository's Dockerfile builds it)")
    run.add_argument("--fidelity", choices=["fast", "fine"], default=None,
                     help="sim: fast runs fault-free training stretches as one event each, "
                          "fine simulates every step (default: the scenario's, fast)")
    run.add_argument("--force", action="store_true",
                     help="replace an earlier run's output in --out (only the files "
                          "elastic-sim wrote are removed)")
    run.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    run.add_argument("--verbose", "-v", action="store_true",
                     help="list every check that holds, with what it examined (default: "
                          "one line for them; failures and n/a are always listed)")
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
    _add_study(sub)
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


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for
    (importlib.metadata is most of what ``--help`` would otherwise cost)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{parser.prog} {_version()}")  # on stdout, as argparse's version action
        parser.exit()


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


def _add_study(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser("study", help="goodput of a job over weeks of failures, per setting: "
                                      "direct simulation, or sampled recoveries composed")
    st.add_argument("spec", help="study YAML file")
    st.add_argument("--method", choices=["auto", "direct", "composed"], default=None,
                    help="direct: simulate the whole horizon; composed: recoveries sampled "
                         "in the simulator, composed over the failure arrivals (default: "
                         "the study's, auto)")
    st.add_argument("--replications", type=_pos_int, default=None,
                    help="replications per setting (default: the study's)")
    st.add_argument("--workers", type=_pos_int, default=1,
                    help="worker processes for the sampled recoveries")
    st.add_argument("--out", type=Path, default=None,
                    help="where study.json, goodput.png and study.html go (default: "
                         "runs/study-<name>)")
    st.add_argument("--cache", type=Path, default=None, metavar="DIR",
                    help="sampled recoveries kept here across studies (default: "
                         "~/.cache/elastic-sim/study)")
    st.add_argument("--no-cache", action="store_true", help="sample every recovery afresh")
    _add_ray(st)


def _add_explore(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ex = sub.add_parser("explore", help="search fault schedules around a scenario in the sim; "
                                        "shrink each violation and write a reproducer")
    ex.add_argument("scenario", help="scenario YAML file (its hosts, protocol and knobs)")
    limit = ex.add_mutually_exclusive_group()
    limit.add_argument("--budget", type=_pos_int, help="number of schedules to run")
    limit.add_argument("--time", type=float, dest="time_s", metavar="SECONDS",
                       help="search for this many seconds of wall time (to within one "
                            "schedule)")
    ex.add_argument("--exhaustive", action="store_true",
                    help="instead of drawing schedules: enumerate every ordering of the "
                         "protocol's decisions and every single fault at each, up to "
                         "--depth, over its pure decision functions (torchelastic's "
                         "rendezvous, Horovod's driver; 2-4 nodes), and replay each "
                         "violating path in the sim")
    ex.add_argument("--depth", type=_pos_int, default=24,
                    help="--exhaustive: most decisions on one path (default 24)")
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
    ex.add_argument("--max-duration", type=float, default=None,
                    help="longest fault duration drawn, seconds (default: 1.5 times the "
                         "protocol's longest timeout knob, at least 60; durations are also "
                         "drawn just short of and past each timeout)")
    ex.add_argument("--spare", default="", metavar="HOST,...",
                    help="hosts never crashed (e.g. the store host)")
    ex.add_argument("--horizon", type=float, default=None, metavar="SECONDS",
                    help="faults start within this run time (default: the fault-free run's "
                         "length)")
    ex.add_argument("--max-crashes", type=_nonneg_int, default=None,
                    help="most hosts one schedule crashes for good (the protocol's contract)")
    own = ex.add_mutually_exclusive_group()
    own.add_argument("--around", type=_around, default=None, metavar="SECONDS[,SCALE]",
                     help="keep the scenario's own faults in every case (the default) and "
                          "move each within these bounds: its time by up to SECONDS either "
                          "way (default 5), its duration by up to a factor SCALE (default "
                          "2), and now and then to another host; 0 keeps them as written")
    own.add_argument("--replace", action="store_true",
                     help="drop the scenario's own faults: search from no fault at all")
    ex.add_argument("--no-swarm", action="store_true",
                    help="draw every schedule over the whole space (default: each draws "
                         "which fault types and hosts it may use first: swarm testing)")
    ex.add_argument("--no-guide", action="store_true",
                    help="draw every schedule fresh (default: half mutate earlier schedules "
                         "that reached a new protocol state, transition or mechanism)")
    ex.add_argument("--reports", choices=["new", "all", "none"], default="new",
                    help="whose reproducers get their HTML report after the search, while "
                         "--time lasts: the new mechanisms' (default), all, none (`elastic-sim "
                         "report DIR` renders one later)")
    ex.add_argument("--ignore", default=None, metavar="CHECK,...",
                    help="checks not to report (default: the scenario's "
                         "expect.violated_checks)")
    ex.add_argument("--fail-on", choices=["promise", "any"], default="promise",
                    help="what makes the campaign fail (exit 1): a finding where the "
                         "protocol broke its own promise (default; upstream's known weak "
                         "spots and findings outside the contract are reported, not failed), "
                         "or any finding")
    _add_ray(ex)
    _add_junit(ex)


def _around(text: str) -> tuple[float, float]:
    """``SECONDS[,SCALE]``: how far the scenario's own faults may move."""
    shift_s, _, scale_s = text.partition(",")
    try:
        shift, scale = float(shift_s), float(scale_s or 2.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SECONDS[,SCALE], got {text!r}") from None
    if not (0 <= shift < float("inf") and 1 <= scale < float("inf")):
        raise argparse.ArgumentTypeError(f"expected SECONDS >= 0 and SCALE >= 1, got {text!r}")
    return shift, scale


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
