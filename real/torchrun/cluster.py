"""``--mode torchrun`` through the cluster launchers (``--launcher slurm|netns|env``): each
node runs the torchrun agents of its share of the hosts, as real mode's nodes run its
processes (:mod:`elastic_sim.real.cluster`).

The coordinator (:class:`TorchrunCoordinator`) is real mode's, with two differences. Its
ASSIGN carries each node's torchrun command lines (:func:`.flags.commands`): a host's
``--local-addr`` is its node's address, or, when every node is on this machine (all
addresses loopback), the host's own loopback address as in local torchrun mode, so that
upstream orders the nodes of a rendezvous as it does locally. And a node hands over
upstream's raw streams (agent streams, the bundled worker's events) with their times
already on the run's axis (the node's clock minus its origin, which the coordinator set
from the measured clock offset); the coordinator converts them all at once
(:func:`.convert.convert` rebuilds each round's members from every agent's report).

Faults fire at the coordinator through real mode's injector; a node carries out the
signals on its hosts' processes (:class:`.launcher.Launcher`'s targets, real mode's
:class:`~elastic_sim.real.faults.targets.HostTargets` over the marked processes) and the
network cuts (nftables on its own address), as real mode's nodes do.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.real.cluster import wire
from elastic_sim.real.cluster.coordinator import ClusterError, Coordinator, Node
from elastic_sim.real.cluster.launchers import LaunchOptions
from elastic_sim.real.cluster.launchers import run_cluster as run_nodes
from elastic_sim.real.cluster.node import (
    TRACE_CHUNK,
    CoordinatorLink,
    NodeControl,
    NodeDriven,
    reader,
)
from elastic_sim.real.faults.injector import Injector
from elastic_sim.real.faults.netns import host_address
from elastic_sim.real.supervisor.process import LaunchError
from elastic_sim.real.supervisor.tracefile import merge
from elastic_sim.real.torchrun import Options, deliver, free_port, killed_by
from elastic_sim.real.torchrun.convert import Inputs, convert
from elastic_sim.real.torchrun.flags import Command, commands
from elastic_sim.real.torchrun.launcher import Launcher
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

AGENT_FILE = "agent-{host}.jsonl"
WORKER_DIR = "workers"


def run_cluster(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
                emit: Callable[[TraceEvent], None], options: Options, launch: LaunchOptions,
                log: Callable[[str], None]) -> RunResult:
    """Run ``world``'s torchrun agents on the nodes ``launch.launcher`` starts."""

    def make(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
             listener: socket.socket, secret: str, nodes: int,
             log: Callable[[str], None]) -> Coordinator:
        return TorchrunCoordinator(world, faults, seed, workdir, listener, secret, nodes, log,
                                   options, launch.launcher)

    return run_nodes(world, faults, seed, workdir, emit, launch, log, make)


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


class TorchrunCoordinator(Coordinator):
    """Real mode's coordinator, handing out torchrun commands and converting upstream's
    streams (see the module docstring)."""

    def __init__(self, world: World, faults: Sequence[Fault], seed: int, workdir: Path,
                 listener: socket.socket, secret: str, nodes: int,
                 log: Callable[[str], None], options: Options, launcher: str) -> None:
        super().__init__(world, faults, seed, workdir, listener, secret, nodes, log)
        self.options = options
        self.launcher = launcher
        self.commands: dict[str, Command] = {}

    def _assign_extra(self, node: Node) -> wire.Message:
        if not self.commands:
            names = list(self.world.host_names)
            owned = {h: self.owner[h].address for h in names}
            one_machine = all(_loopback(a) for a in owned.values())
            addresses = ({h: host_address(i) for i, h in enumerate(names)} if one_machine
                         else owned)
            args = self.world.args
            self.commands = {c.host: c for c in commands(
                names, str(args["store_host"]), free_port(), args["knobs"], args["workload"],
                self.seed, self.options.script, addresses)}
        return {"mode": "torchrun", "commands": [asdict(self.commands[h]) for h in node.hosts]}

    def _result(self, injector: Injector, hung: bool, end: float,
                emit: Callable[[TraceEvent], None]) -> RunResult:
        root = self.workdir / "torchrun"
        for node in self.nodes:
            for name, lines in node.files.items():
                path = root / f"node{node.index}" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            hung = hung or node.hung
            if node.failed:
                self.log(f"coordinator: node {node.index} ({node.machine}): {node.failed}")
        lost = [n.index for n in self.nodes if n.failed]
        if lost:
            raise ClusterError(f"nodes {lost} broke off; their streams are missing")
        if not hung:
            end = max([end, *(n.end for n in self.nodes if n.done)])
        hosts = list(self.world.host_names)
        codes: dict[str, int] = {}
        exit_t: dict[str, float] = {}
        for node in self.nodes:
            codes.update({str(k): int(v) for k, v in node.report.get("agent_codes", {}).items()})
            exit_t.update({str(k): float(v)
                           for k, v in node.report.get("agent_exit_t", {}).items()})
        streams = {h: root / f"node{self.owner[h].index}" / AGENT_FILE.format(host=h)
                   for h in hosts}
        events = convert(Inputs(
            t0=0.0, hosts=hosts, addresses={h: c.address for h, c in self.commands.items()},
            streams=streams, worker_files=sorted(root.glob(f"node*/{WORKER_DIR}/*.jsonl")),
            launcher_events=merge([self.workdir / "trace" / "coordinator.jsonl"]),
            agent_codes=codes, agent_exit_t=exit_t, killed=killed_by(injector), end=end))
        network = (f"cluster nodes started by --launcher {self.launcher}; torch's stores "
                   "listen on every interface of their node")
        cmds = [self.commands[h] for h in hosts]
        return deliver(self.world, cmds, events, network, end, hung, injector.reports(end),
                       emit)


class NodeAgents(NodeDriven, Launcher):
    """A cluster node's share of the torchrun agents, driven by the coordinator."""

    def __init__(self, world: World, cmds: Sequence[Command], workdir: Path,
                 coord: CoordinatorLink, bind: str) -> None:
        super().__init__(world, [], cmds, workdir, private_net=False)
        self.control = NodeControl(coord, bind, [c.host for c in cmds])


def serve_node(world: World, assign: wire.Message, root: Path, own: str,
               coord: CoordinatorLink, log: Callable[[str], None]) -> list[wire.Message] | None:
    """Run this node's torchrun agents; the frames that hand over upstream's streams and
    the agents' exits (None if the launch failed)."""
    cmds = [Command(**c) for c in assign.get("commands", [])]
    node = NodeAgents(world, cmds, root, coord, own)
    threading.Thread(target=reader, args=(coord, node.command, root / "addr"),
                     daemon=True).start()
    try:
        out = node.run()
    except LaunchError as exc:
        log(str(exc))
        return None
    node.control.await_end()
    files = {AGENT_FILE.format(host=c.host): node.stream(c.host) for c in cmds}
    files.update({f"{WORKER_DIR}/{p.name}": p for p in sorted((root / WORKER_DIR).glob("*.jsonl"))})
    frames: list[wire.Message] = []
    for name, path in files.items():
        lines = _run_time(path, out.t0)
        frames += [{"op": "file", "name": name, "lines": lines[i:i + TRACE_CHUNK]}
                   for i in range(0, max(len(lines), 1), TRACE_CHUNK)]
    return [*frames, {"op": "done", "exit_codes": {}, "end": out.end, "hung": out.hung,
                      "agent_codes": out.agent_codes, "agent_exit_t": out.agent_exit_t}]


def _run_time(path: Path, t0: float) -> list[str]:
    """``path``'s JSON lines with their wall time ``t`` made run time (minus ``t0``); a
    torn last line (its writer was killed) is left out."""
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        try:
            obj: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "t" in obj:
            obj["t"] = float(obj["t"]) - t0
            out.append(json.dumps(obj))
    return out
