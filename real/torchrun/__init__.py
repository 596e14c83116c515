"""``--mode torchrun``: a torchelastic scenario run by upstream itself.

Each host is an actual ``torchrun`` agent (torch's launcher, elastic agent and c10d
rendezvous) on its own loopback address, the scenario's knobs mapped onto torchrun's flags
and ``--rdzv-conf`` (:mod:`.flags`), training the bundled worker (:mod:`.worker`, the
scenario's workload) or the user's own script. Faults go through real mode's injector
(:class:`elastic_sim.real.injector.Injector`) against this launcher's view of the
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

from elastic_sim.faults.model import Fault
from elastic_sim.real.injector import UnsupportedInRealMode, check_supported
from elastic_sim.real.torchrun import flags
from elastic_sim.real.torchrun.convert import NOT_JUDGED, NOT_JUDGED_SCRIPT, Inputs, convert
from elastic_sim.real.tracefile import merge
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

__all__ = ["Options", "not_judged", "refusal", "run"]


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


def not_judged(options: Options) -> dict[str, str]:
    """Checks upstream's events cannot judge in this run, with why."""
    return {**NOT_JUDGED, **(NOT_JUDGED_SCRIPT if options.script else {})}


def run(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
        emit: Callable[[TraceEvent], None], options: Options) -> RunResult:
    """Run ``world`` under torchrun with ``faults``; emit the converted trace in run-time
    order. Nothing started here outlives the call (Ctrl-C included)."""
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
    from elastic_sim.real.torchrun.launcher import Launcher

    args = world.args
    hosts = list(world.host_names)
    workdir.mkdir(parents=True, exist_ok=True)
    # Hosts sit at real mode's per-host loopback addresses, with or without a namespace.
    cmds = flags.commands(hosts, str(args["store_host"]), _free_port(), args["knobs"],
                          args["workload"], seed, options.script)
    launcher = Launcher(world, faults, cmds, workdir)
    out = launcher.run()
    inj = launcher.injector
    killed = {name: (k.t, k.fault_id) for name, k in
              [*inj.host_kills.items(), *inj.proc_kills.items()]}
    events = convert(Inputs(
        t0=out.t0, hosts=hosts, addresses={c.host: c.address for c in cmds},
        streams={h: launcher.stream(h) for h in hosts},
        worker_files=sorted((workdir / "workers").glob("*.jsonl")),
        launcher_events=merge([p for p in [workdir / "launcher.jsonl"] if p.exists()]),
        agent_codes=out.agent_codes, agent_exit_t=out.agent_exit_t, killed=killed,
        end=out.end))
    setup = TraceEvent(0.0, "*", "elastic-sim", "torchrun_setup", {
        "argv": {c.host: c.argv for c in cmds},
        "unmapped": flags.unmapped(args["knobs"]),
        "network": ("a private network namespace" if launcher.netns is not None else
                    f"this machine's loopback; torch's stores listen on every interface "
                    f"(no private namespace: {launcher.isolation})")})
    codes: dict[str, int] = {}
    for ev in [setup, *events]:
        emit(ev)
        if ev.kind == "proc_exit":
            codes[ev.proc] = int(ev.get("code", -9))
    last = max((e.t for e in events if e.kind == "proc_exit"), default=out.end)
    return RunResult(exit_codes=dict(sorted(codes.items())), end_time=out.end if out.hung
                     else max(last, 0.0), hung=out.hung, faults=inj.reports(out.end))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
