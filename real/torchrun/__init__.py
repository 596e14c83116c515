"""``--mode torchrun``: a torchelastic scenario run by upstream itself.

Each host is an actual ``torchrun`` agent (torch's launcher, elastic agent and c10d
rendezvous) on its own loopback address, the scenario's knobs mapped onto torchrun's flags
and ``--rdzv-conf`` (:mod:`.flags`), training the bundled worker (:mod:`.worker`, the
scenario's workload) or the user's own script. Faults go through real mode's injector
(:class:`elastic_sim.real.faults.injector.Injector`) against this launcher's view of the
processes (:mod:`.launcher`); what happened is read back from torchelastic's own streams
(:mod:`.agent`, :mod:`.convert`) into the project's trace format.

Importing this package does not import torch; the agents it starts do.
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_sim.faults.model import Fault
from elastic_sim.real.faults.injector import Injector, UnsupportedInRealMode, check_supported
from elastic_sim.real.supervisor.tracefile import merge
from elastic_sim.real.torchrun import flags, logs
from elastic_sim.real.torchrun.convert import NOT_JUDGED, Inputs, convert
from elastic_sim.real.torchrun.workers import instrumented, unrecorded
from elastic_sim.trace import TraceEvent
from elastic_sim.world import FaultReport, RunResult, World

if TYPE_CHECKING:
    from elastic_sim.real.cluster.launchers import LaunchOptions

__all__ = ["Options", "not_judged", "refusal", "run", "steps"]


@dataclass(frozen=True)
class Options:
    """What the command line adds to a scenario for ``--mode torchrun``."""

    script: tuple[str, ...] = ()
    """The user's training script and its arguments; empty: the bundled worker."""


def refusal(protocol: str, knobs: dict[str, object]) -> tuple[str, str] | None:
    """(field, why) if this scenario cannot run under torchrun, else None."""
    if protocol != "torchelastic":
        return "protocol.name", (f"--mode torchrun runs torchelastic scenarios; this one is "
                                 f"{protocol!r}")
    bad = flags.knob_problem(knobs)
    if bad is not None:
        return f"protocol.knobs.{bad[0]}", bad[1]
    return None


def not_judged(options: Options, events: Sequence[TraceEvent]) -> dict[str, str]:
    """Checks upstream's events cannot judge in this run (``events``), with why: with a
    user's script, also those whose events its workers did not record."""
    return {**NOT_JUDGED, **(unrecorded(events) if options.script else {})}


def steps(options: Options, workload_steps: int, events: Sequence[TraceEvent]) -> int:
    """The job's steps: a script that imports :mod:`elastic_sim.probe` trains the
    script's ``--steps N`` (among its arguments), else the scenario's ``workload_steps``;
    one that does not is done when torchrun is (0: its steps are not seen)."""
    if not options.script:
        return workload_steps
    if not instrumented(events):
        return 0
    return script_steps(options.script[1:]) or workload_steps


def script_steps(args: Sequence[str]) -> int | None:
    """``N`` of ``--steps N`` or ``--steps=N`` among a script's arguments (None: none)."""
    for i, arg in enumerate(args):
        value = (args[i + 1] if arg == "--steps" and i + 1 < len(args)
                 else arg.partition("=")[2] if arg.startswith("--steps=") else None)
        if value is not None and value.isdigit():
            return int(value)
    return None


def run(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
        emit: Callable[[TraceEvent], None], options: Options,
        launch: LaunchOptions | None = None,
        log: Callable[[str], None] = print) -> RunResult:
    """Run ``world`` under torchrun with ``faults``; emit the converted trace in run-time
    order. Nothing started here outlives the call (Ctrl-C included). ``launch`` spreads
    the hosts over cluster nodes, each running its hosts' agents (:mod:`.cluster`); by
    default every agent runs on this machine."""
    check_supported(world, faults)
    late = [h.name for h in world.hosts if h.start_delay > 0]
    if late:
        raise UnsupportedInRealMode(
            f"host {late[0]!r}: start_delay needs the project's own process entry to delay "
            "the processes it starts; torchrun mode starts workers through upstream's "
            "agent, which cannot; run with --mode real or --mode sim")
    if importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("--mode torchrun needs torch (pip install torch==2.13.0)",
                                  name="torch")
    workdir.mkdir(parents=True, exist_ok=True)
    if launch is not None and launch.launcher != "local":
        from elastic_sim.real.torchrun.cluster import run_cluster

        return run_cluster(world, faults, seed, workdir, emit, options, launch, log)
    from elastic_sim.real.torchrun.launcher import Launcher

    args = world.args
    hosts = list(world.host_names)
    # Hosts sit at real mode's per-host loopback addresses, with or without a namespace.
    cmds = flags.commands(hosts, str(args["store_host"]), free_port(), args["knobs"],
                          args["workload"], seed, options.script)
    launcher = Launcher(world, faults, cmds, workdir)
    out = launcher.run()
    inj = launcher.injector
    streams = {h: launcher.stream(h) for h in hosts}
    for line in logs.failure_tails(workdir, streams, out.t0, killed_by(inj)):
        log(line)
    events = convert(Inputs(
        t0=out.t0, hosts=hosts, addresses={c.host: c.address for c in cmds},
        streams=streams,
        worker_files=sorted((workdir / "workers").glob("*.jsonl")),
        launcher_events=merge([p for p in [workdir / "launcher.jsonl"] if p.exists()]),
        agent_codes=out.agent_codes, agent_exit_t=out.agent_exit_t, killed=killed_by(inj),
        end=out.end))
    network = ("a private network namespace" if launcher.netns is not None else
               f"this machine's loopback; torch's stores listen on every interface "
               f"(no private namespace: {launcher.isolation})")
    return deliver(world, cmds, events, network, out.end, out.hung, inj.reports(out.end), emit)


def killed_by(inj: Injector) -> dict[str, tuple[float, str]]:
    """Process or host name -> (run time, fault id) of the injector's kills."""
    return {name: (k.t, k.fault_id) for name, k in
            [*inj.host_kills.items(), *inj.proc_kills.items()]}


def deliver(world: World, cmds: Sequence[flags.Command], events: Sequence[TraceEvent],
            network: str, end: float, hung: bool, faults: list[FaultReport],
            emit: Callable[[TraceEvent], None]) -> RunResult:
    """Emit the run's setup (torchrun's command lines, what was not mapped, the network)
    and its converted ``events``; the run's result."""
    setup = TraceEvent(0.0, "*", "elastic-sim", "torchrun_setup", {
        "argv": {c.host: c.argv for c in cmds},
        "unmapped": flags.unmapped(world.args["knobs"]), "network": network})
    codes: dict[str, int] = {}
    for ev in [setup, *events]:
        emit(ev)
        if ev.kind == "proc_exit":
            codes[ev.proc] = int(ev.get("code", -9))
    last = max((e.t for e in events if e.kind == "proc_exit"), default=end)
    return RunResult(exit_codes=dict(sorted(codes.items())), end_time=end if hung
                     else max(last, 0.0), hung=hung, faults=faults)


def free_port() -> int:
    """A TCP port free on this machine now (the rendezvous store's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
