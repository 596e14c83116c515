"""A cluster node: ``elastic-sim node`` (or ``python -m elastic_sim.real.cluster.node``),
started once per machine by the cluster's launcher.

It connects to the coordinator, says where it stands (:mod:`.place`) and at which address
its processes can be reached, and is given its share of the scenario's hosts. It then runs
them with the local launcher's machinery (:class:`NodeLauncher`): same process tree, same
READY/GO start, same cleanup. Meanwhile a reader thread answers clock probes, carries out
fault commands (signals to its hosts' processes, network cuts with nftables where it has
root), and writes the addresses other nodes' processes publish; a watcher thread
publishes its own processes' addresses. When its hosts have exited it says IDLE, waits for
the coordinator's END (which says which kills were faults), accounts for every process,
sends its trace and exits. If the coordinator goes away, it kills everything it started
and exits 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic_sim.real.cluster import nodecut, wire
from elastic_sim.real.cluster.place import Placement, PlacementError, placement
from elastic_sim.real.cluster.worldjson import world_from_json
from elastic_sim.real.faults.injector import Injector, Kill
from elastic_sim.real.faults.targets import HostTargets, Targets
from elastic_sim.real.supervisor import reaper
from elastic_sim.real.supervisor.launcher import Launcher
from elastic_sim.real.supervisor.process import LaunchError
from elastic_sim.real.supervisor.supervise import Supervisor
from elastic_sim.real.supervisor.workdir import write_atomic
from elastic_sim.trace import TraceEvent, encode
from elastic_sim.world import World

CONNECT_TIMEOUT = 120.0
"""Seconds a node keeps trying to reach its coordinator (pods and tasks start in any order)."""
OPEN_TIMEOUT = 30.0
"""Seconds the coordinator gets to open the control channel once connected."""
ASSIGN_TIMEOUT = 360.0
"""Seconds a node waits for its ASSIGN (the coordinator waits for every node first, up to
its HELLO_TIMEOUT)."""
GO_TIMEOUT = 300.0
"""Seconds a ready node waits for the coordinator's GO (every other node must get ready)."""
END_TIMEOUT = 60.0
"""Seconds an idle node waits for END before it accounts on its own."""
TRACE_CHUNK = 2000
"""Trace events per TRACE frame."""
ADDR_POLL = 0.02
"""Seconds between looks at the run directory for newly published addresses."""

_STEM = re.compile(r"^[A-Za-z0-9_.-]+$")


class CoordinatorLink:
    """This node's side of the control channel, shared by its threads."""

    def __init__(self, chan: wire.Channel) -> None:
        self.chan = chan
        self.go = threading.Event()
        self.t0 = 0.0
        self.ended = threading.Event()
        self.kills: dict[str, Any] = {}
        self.over = False
        """Whether END said the job is over although daemons still run (every node's
        processes are daemons outside the job, or gone): not a hang."""
        self.lost = ""
        """Why the channel broke ("" while it holds)."""

    def send(self, msg: wire.Message) -> bool:
        """Send; False if the coordinator is gone."""
        try:
            self.chan.send(msg)
            return True
        except OSError as exc:
            self.lose(f"send failed: {exc}")
            return False

    def lose(self, why: str) -> None:
        """The coordinator is gone: release every waiter."""
        if not self.lost:
            self.lost = why
        self.go.set()
        self.ended.set()


class NodeControl:
    """What makes a launcher a cluster node's: the run's origin and end come from the
    coordinator, and fault commands act on the launcher's processes (a reader thread
    calls :meth:`command`) only while the run is live."""

    def __init__(self, coord: CoordinatorLink, bind: str, local: Sequence[str]) -> None:
        self.coord = coord
        self.local = tuple(local)
        self.nodecut = nodecut.NodeCut(bind)
        self.lock = threading.Lock()
        """Held while a command acts on the processes, and while the run is torn down."""
        self.live = False
        self._quiet: bool | None = None

    def say_quiet(self, quiet: bool) -> None:
        """Tell the coordinator (each change once) whether every process this node still
        runs stands for a daemon outside the job: the coordinator ends the run when every
        node is quiet or idle, as the local launcher does when only daemons are left."""
        if quiet != self._quiet:
            self._quiet = quiet
            self.coord.send({"op": "quiet", "quiet": quiet})

    def origin(self) -> float:
        """Say READY to the coordinator and wait for GO: the run's origin on this clock."""
        self.coord.send({"op": "ready"})
        if not self.coord.go.wait(GO_TIMEOUT) or self.coord.lost:
            raise LaunchError(f"no GO from the coordinator: {self.coord.lost or 'timed out'}")
        self.live = True
        return self.coord.t0

    def should_stop(self) -> bool:
        """Whether the coordinator has ended the run."""
        return self.coord.ended.is_set()

    def teardown(self, kill: Callable[[], None]) -> None:
        """End the live run: ``kill`` every process, lift this node's cuts."""
        with self.lock:
            self.live = False
            kill()
            self.nodecut.clear()

    def await_end(self) -> None:
        """Say IDLE (unless the coordinator already ended the run) and wait for END."""
        if not self.coord.ended.is_set():
            self.coord.send({"op": "idle"})
            self.coord.ended.wait(END_TIMEOUT)

    def command(self, target: Targets, msg: wire.Message) -> wire.Message:
        """Carry out one fault command on ``target``; the answer names why not when it
        could not."""
        with self.lock:
            if not self.live:
                return {"ok": False, "why": "the node's run is over"}
            op = msg.get("do")
            if op == "signal_host" and msg.get("host") in self.local:
                return {"ok": target.signal_host(str(msg["host"]), int(msg["sig"])), "why": ""}
            if op == "signal_proc":
                why = target.signal_proc(str(msg["name"]), int(msg["sig"]))
                return {"ok": not why, "why": why}
            if op == "signal_role" and msg.get("host") in self.local:
                why = target.signal_role(str(msg["host"]), str(msg["to"]), int(msg["sig"]))
                return {"ok": not why, "why": why}
            if op in ("cut", "heal"):
                why = self.nodecut.apply(str(msg["fault"]), op == "cut", list(msg.get("out", [])),
                                         list(msg.get("in", [])))
                return {"ok": not why, "why": why}
            return {"ok": False, "why": f"unknown command {op!r} for this node"}


class NodeDriven(Supervisor):
    """What a launcher on a cluster node does as the coordinator says (through
    :attr:`control`): it starts the run at the origin it is given, ends it when told, and
    tears it down under the control's lock. Mixed into real mode's :class:`NodeLauncher`
    and torchrun mode's :class:`elastic_sim.real.torchrun.cluster.NodeAgents`."""

    control: NodeControl
    targets: HostTargets

    def _origin(self) -> float:
        return self.control.origin()

    def _should_stop(self) -> bool:
        return self.control.should_stop()

    def _job_over(self) -> bool:
        """Never on a node's own view (the hosts of its share may all be daemons while the
        job runs elsewhere): the node tells the coordinator whether only daemons are left
        here (:meth:`NodeControl.say_quiet`), and the job is over when the coordinator's
        END says so (every node quiet or idle)."""
        coord = self.control.coord
        if coord.ended.is_set():
            return coord.over
        self.control.say_quiet(super()._job_over())
        return False

    def _kill_everything(self) -> None:
        self.control.teardown(super()._kill_everything)

    def command(self, msg: wire.Message) -> wire.Message:
        """Carry out one fault command on this node's processes (:meth:`NodeControl.command`)."""
        return self.control.command(self.targets, msg)


class NodeLauncher(NodeDriven, Launcher):
    """The local launcher for this node's share of the hosts, driven by the coordinator."""

    def __init__(self, world: World, seed: int, workdir: Path, bind: str,
                 local: Sequence[str], addresses: Mapping[str, str],
                 coord: CoordinatorLink) -> None:
        super().__init__(world, [], seed, workdir, bind, local=local, addresses=addresses)
        self.control = NodeControl(coord, bind, local)

    def _account(self, injector: Injector, hung: bool, end: float) -> tuple[dict[str, int], float]:
        self.control.await_end()
        kills = self.control.coord.kills
        for host, k in kills.get("hosts", {}).items():
            injector.host_kills[host] = Kill(float(k["t"]), str(k["fault"]))
        for proc, k in kills.get("procs", {}).items():
            injector.proc_kills[proc] = Kill(float(k["t"]), str(k["fault"]))
        return super()._account(injector, hung, end)


def reader(coord: CoordinatorLink, command: Callable[[wire.Message], wire.Message],
           addr_dir: Path) -> None:
    """Answer the coordinator until the channel ends: clock probes, GO, fault commands
    (``command``), addresses other nodes publish (written into ``addr_dir``), END."""
    while True:
        try:
            msg = coord.chan.recv()
        except (OSError, wire.AuthError) as exc:
            coord.lose(f"{type(exc).__name__}: {exc}")
            return
        op = msg.get("op")
        if op == "ping":
            coord.send({"op": "pong", "k": msg.get("k"), "t": time.time()})
        elif op == "go":
            coord.t0 = float(msg["t0"])
            coord.go.set()
        elif op == "cmd":
            coord.send({"op": "result", "id": msg.get("id"), **command(msg)})
        elif op == "addr":
            stem = str(msg.get("file", ""))
            if _STEM.match(stem):
                write_atomic(addr_dir / stem, str(msg.get("value", "")))
        elif op == "end":
            coord.kills = dict(msg.get("kills", {}))
            coord.over = msg.get("over") is True
            coord.ended.set()


def _publisher(coord: CoordinatorLink, node: NodeLauncher, stop: threading.Event) -> None:
    """Send the addresses this node's processes publish (each change once)."""
    addr_dir = node.run_dir.root / "addr"
    sent: dict[str, str] = {}
    local = tuple(f"{h}__" for h in node.local)
    while not stop.wait(ADDR_POLL):
        try:
            names = sorted(os.listdir(addr_dir))
        except OSError:
            continue
        for stem in names:
            if not stem.startswith(local) or stem.endswith(".part"):
                continue
            try:
                value = (addr_dir / stem).read_text()
            except OSError:
                continue
            if value.endswith("\n") and sent.get(stem) != value:
                sent[stem] = value
                coord.send({"op": "addr", "file": stem, "value": value})


def _serve_real(world: World, assign: wire.Message, root: Path, own: str,
                local: Sequence[str], coord: CoordinatorLink,
                log: Callable[[str], None]) -> list[wire.Message] | None:
    """Run this node's hosts as real mode does; the frames that hand over its trace and
    exits (None if the launch failed)."""
    node = NodeLauncher(world, int(assign["seed"]), root, own, local,
                        dict(assign["addresses"]), coord)
    stop = threading.Event()
    threading.Thread(target=reader, args=(coord, node.command, node.run_dir.root / "addr"),
                     daemon=True).start()
    threading.Thread(target=_publisher, args=(coord, node, stop), daemon=True).start()
    events: list[TraceEvent] = []
    try:
        result = node.run(events.append)
    except LaunchError as exc:
        log(str(exc))
        return None
    finally:
        stop.set()
    frames: list[wire.Message] = [
        {"op": "trace", "lines": [encode(e) for e in events[i:i + TRACE_CHUNK]]}
        for i in range(0, len(events), TRACE_CHUNK)]
    return [*frames, {"op": "done", "exit_codes": result.exit_codes, "end": result.end_time,
                      "hung": result.hung}]


def connect(place: Placement, secret: str, timeout: float = CONNECT_TIMEOUT) -> wire.Channel:
    """Connect to the coordinator, retrying until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection(place.coordinator, timeout=10)
            sock.settimeout(None)
        except OSError as exc:
            if time.monotonic() > deadline:
                raise ConnectionError(f"coordinator {place.coordinator[0]}:"
                                      f"{place.coordinator[1]} unreachable: {exc}") from None
            time.sleep(0.5)
            continue
        try:
            return wire.open_channel(sock, secret, "node", OPEN_TIMEOUT)
        except BaseException:
            sock.close()
            raise


def run_node(place: Placement, secret: str, workdir: Path | None, address: str | None,
             log: Callable[[str], None]) -> int:
    """Be node ``place.index`` of a cluster run; the exit code of the node."""
    chan = connect(place, secret)
    coord = CoordinatorLink(chan)
    own = address or chan.sock.getsockname()[0]
    coord.send({"op": "hello", "index": place.index, "count": place.count,
                "machine": socket.gethostname(), "address": own, "pid": os.getpid(),
                "source": place.source})
    assign = chan.recv(timeout=ASSIGN_TIMEOUT)
    if assign.get("op") != "assign":
        log(f"node {place.index}: coordinator refused: {assign.get('why', assign)}")
        return 2
    world = world_from_json(assign["world"])
    local = tuple(assign["hosts"])
    tmp = workdir is None
    root = Path(tempfile.mkdtemp(prefix=f"elastic-sim-node{place.index}-")) if tmp else workdir
    assert root is not None
    frames: list[wire.Message] | None

    def nlog(line: str) -> None:
        log(f"node {place.index}: {line}")

    try:
        if assign.get("mode") == "torchrun":
            from elastic_sim.real.torchrun.cluster import serve_node

            frames = serve_node(world, assign, root, own, coord, nlog)
        else:
            frames = _serve_real(world, assign, root, own, local, coord, nlog)
    finally:
        if tmp:
            shutil.rmtree(root, ignore_errors=True)
    if frames is None or coord.lost:
        log(f"node {place.index}: the run broke off: {coord.lost or 'launch failed'}")
        coord.send({"op": "failed", "why": coord.lost or "launch failed"})
        chan.close()
        return 1
    for frame in frames:
        coord.send(frame)
    try:  # wait for the coordinator to close: our frames are then all read
        chan.sock.settimeout(30)
        chan.sock.recv(1)
    except OSError:
        pass
    chan.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``elastic-sim node``: exit 0 when the run ended and the trace was handed over,
    1 when it broke off, 2 on bad arguments or environment."""
    p = argparse.ArgumentParser(prog="elastic-sim node", description=__doc__.split("\n\n")[0])
    p.add_argument("--coordinator", help="host:port of the coordinator (else $ES_COORDINATOR)")
    p.add_argument("--index", type=int, help="this node's index (else from the launcher)")
    p.add_argument("--count", type=int, help="number of nodes (else from the launcher)")
    p.add_argument("--secret-file", type=Path, help="file holding the run's secret "
                   "(else $ES_SECRET_FILE or $ES_SECRET)")
    p.add_argument("--address", help="address other nodes reach this one at (default: the "
                   "local address of the connection to the coordinator)")
    p.add_argument("--workdir", type=Path, help="keep the node's run directory here "
                   "(default: a temporary directory, removed at the end)")
    p.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.parent_pid:  # started by a launcher on this machine: die with it
        reaper.die_with_parent(args.parent_pid)
    try:
        place = placement(index=args.index, count=args.count, coordinator=args.coordinator)
        secret = wire.secret_from_env(args.secret_file)
    except (PlacementError, ValueError, OSError) as exc:
        print(f"elastic-sim node: {exc}", file=sys.stderr)
        return 2
    try:
        return run_node(place, secret, args.workdir, args.address,
                        lambda line: print(line, file=sys.stderr, flush=True))
    except (ConnectionError, wire.AuthError) as exc:
        print(f"elastic-sim node {place.index}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
