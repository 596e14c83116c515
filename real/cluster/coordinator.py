"""The coordinator of a cluster run: the ``elastic-sim run`` side of :mod:`.node`.

It accepts one authenticated connection per node (a connection whose first frame fails
its HMAC is refused, logged and traced as ``control_refused``), hands each node its share
of the hosts and everyone's address, estimates each node's clock offset from the
fastest of a few probe round trips (offset to the probe's midpoint, uncertainty half its
round trip: traced as ``clock_sync``), and sends GO with the run's origin translated to
each node's clock, so every node's trace is on the coordinator's time axis. It then fires
the scenario's faults through the real-mode injector, whose targets here are commands to
the node that runs the host (:mod:`.forward`), relays published addresses between nodes,
and ends the run when every node is idle (or runs only daemons outside the job, as the
local launcher's rule has it) or the time limit passes. Last it merges the
nodes' traces with its own.
"""

from __future__ import annotations

import hashlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.real.cluster import wire
from elastic_sim.real.cluster.forward import ForwardedTargets
from elastic_sim.real.cluster.place import share
from elastic_sim.real.cluster.worldjson import world_to_json
from elastic_sim.real.faults.injector import Injector
from elastic_sim.real.supervisor.tracefile import TraceFile, merge
from elastic_sim.trace import TraceEvent, encode
from elastic_sim.world import RunResult, World

PROC = "coordinator"
"""The ``proc`` of the coordinator's own trace events."""
HELLO_TIMEOUT = 300.0
"""Seconds every node gets to connect (a cluster scheduler may start them slowly)."""
FIRST_FRAME_TIMEOUT = 10.0
"""Seconds a connection gets, once accepted, to open the channel and send its HELLO: one
that trickles bytes holds the coordinator no longer."""
READY_TIMEOUT = 300.0
"""Seconds every node gets to start its processes (each imports torch)."""
ANSWER_TIMEOUT = 30.0
"""Seconds a node gets to answer a command or a clock probe."""
TRACE_TIMEOUT = 120.0
"""Seconds nodes get, after END, to send their traces."""
PROBES = 8
"""Clock probes per node."""
GO_AHEAD = 0.25
"""Seconds between sending GO and the run's origin, so every node hears it in time."""


class ClusterError(RuntimeError):
    """The cluster run could not begin or broke off (a node missing, refused or lost)."""


@dataclass
class Node:
    """One connected node, as the coordinator sees it."""

    index: int
    chan: wire.Channel
    address: str
    machine: str
    hosts: tuple[str, ...] = ()
    offset: float = 0.0
    """Seconds its clock is ahead of the coordinator's."""
    uncertainty: float = float("inf")
    ready: bool = False
    idle: bool = False
    quiet: bool = False
    """Whether every process it still runs stands for a daemon outside the job."""
    done: bool = False
    failed: str = ""
    lines: list[str] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)
    """Raw files a node hands over (torchrun mode: upstream's streams), name -> lines."""
    report: dict[str, Any] = field(default_factory=dict)
    """Its DONE message."""
    exit_codes: dict[str, int] = field(default_factory=dict)
    end: float = 0.0
    hung: bool = False


class Coordinator:
    """Runs one world on nodes that connect to ``listener`` (see the module docstring)."""

    def __init__(self, world: World, faults: Sequence[Fault], seed: int, workdir: Path,
                 listener: socket.socket, secret: str, nodes: int,
                 log: Callable[[str], None]) -> None:
        if not 0 < nodes:
            raise ValueError("a cluster run needs at least one node")
        self.world = world
        self.faults = list(faults)
        self.seed = seed
        self.workdir = workdir
        self.listener = listener
        self.secret = secret
        self.count = min(nodes, len(world.hosts))
        self.expected = nodes
        self.log = log
        self.nodes: list[Node] = []
        self.owner: dict[str, Node] = {}
        self.t0 = 0.0
        self._q: queue.Queue[tuple[int, wire.Message]] = queue.Queue()
        self._results: dict[int, wire.Message] = {}
        self._pongs: dict[tuple[int, int], float] = {}
        self._next_id = 0
        self.over = False
        """Whether the run ended with daemons still running (the job over, not hung)."""
        (workdir / "trace").mkdir(parents=True, exist_ok=True)
        self._trace = TraceFile(workdir / "trace" / "coordinator.jsonl")

    # -- the run -----------------------------------------------------------------------

    def run(self, emit: Callable[[TraceEvent], None]) -> RunResult:
        """Run the world on the nodes; emit the merged trace."""
        try:
            self._accept()
            self._assign()
            self._sync_clocks()
            self._wait(lambda n: n.ready, READY_TIMEOUT, "ready")
            self._go()
            targets = ForwardedTargets(self.world.host_names, self.owner, self._ask)
            injector = Injector(self.faults, targets, self._trace, self._now)
            hung = self._supervise(injector)
            end = self.world.time_limit if hung else self._now()
            self._end(injector)
            self._wait(lambda n: n.done or bool(n.failed), TRACE_TIMEOUT, "its trace")
        finally:
            for node in self.nodes:
                node.chan.close()
            self.listener.close()
        return self._result(injector, hung, end, emit)

    def _now(self) -> float:
        return time.time() - self.t0

    def _accept(self) -> None:
        """Take HELLOs until every expected node has said one."""
        deadline = time.monotonic() + HELLO_TIMEOUT
        seen: dict[int, Node] = {}
        while len(seen) < self.expected:
            self.listener.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                sock, peer = self.listener.accept()
            except TimeoutError:
                raise ClusterError(
                    f"{len(seen)} of {self.expected} nodes connected within "
                    f"{HELLO_TIMEOUT:.0f}s") from None
            sock.settimeout(None)  # blocking: every read has its own deadline
            by = time.monotonic() + FIRST_FRAME_TIMEOUT
            try:
                chan = wire.open_channel(sock, self.secret, "coordinator", FIRST_FRAME_TIMEOUT)
                hello = chan.recv(timeout=max(0.0, by - time.monotonic()))
            except (OSError, wire.AuthError) as exc:
                self._refuse_socket(sock, f"{peer[0]}:{peer[1]}", f"{type(exc).__name__}: {exc}")
                continue
            why = self._check_hello(hello, seen)
            if why:
                try:
                    chan.send({"op": "refused", "why": why})
                except OSError:
                    pass
                self._refuse(chan, f"{peer[0]}:{peer[1]}", why)
                continue
            index = int(hello["index"])
            seen[index] = Node(index, chan, str(hello["address"]), str(hello.get("machine", "")))
        self.nodes = [seen[i] for i in range(self.expected)]

    def _check_hello(self, hello: wire.Message, seen: dict[int, Node]) -> str:
        if hello.get("op") != "hello":
            return f"expected hello, got {hello.get('op')!r}"
        index, count = hello.get("index"), hello.get("count")
        if count != self.expected:
            return f"node says the run has {count} nodes; it has {self.expected}"
        if not isinstance(index, int) or not 0 <= index < self.expected:
            return f"node index {index!r} is not within 0..{self.expected - 1}"
        if index in seen:
            return f"a node with index {index} has already connected"
        if not isinstance(hello.get("address"), str):
            return "node gave no address"
        return ""

    def _refuse(self, chan: wire.Channel, peer: str, why: str) -> None:
        self._refuse_socket(chan.sock, peer, why)

    def _refuse_socket(self, sock: socket.socket, peer: str, why: str) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        self.log(f"coordinator: refused control connection from {peer}: {why}")
        self._trace.event(0.0, "*", PROC, "control_refused", {"peer": peer, "why": why})

    def _assign(self) -> None:
        names = self.world.host_names
        for node in self.nodes:
            node.hosts = share(names, self.count, node.index) if node.index < self.count else ()
            for host in node.hosts:
                self.owner[host] = node
        addresses = {h: self.owner[h].address for h in names}
        for node in self.nodes:
            node.chan.send({"op": "assign", "world": world_to_json(self.world),
                            "hosts": list(node.hosts), "addresses": addresses,
                            "seed": self.seed, **self._assign_extra(node)})
            threading.Thread(target=self._read, args=(node,), daemon=True).start()

    def _assign_extra(self, node: Node) -> wire.Message:
        """What else a node's ASSIGN carries (a mode of its own: its commands)."""
        return {}

    def _read(self, node: Node) -> None:
        while True:
            try:
                msg = node.chan.recv()
            except (OSError, wire.AuthError) as exc:
                if isinstance(exc, wire.AuthError):
                    self.log(f"coordinator: node {node.index}: refused a frame: {exc}")
                self._q.put((node.index, {"op": "closed", "why": f"{type(exc).__name__}: {exc}"}))
                return
            self._q.put((node.index, msg))

    def _pump(self, timeout: float) -> None:
        """Handle the next message from any node, waiting up to ``timeout``."""
        try:
            index, msg = self._q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return
        node = self.nodes[index]
        op = msg.get("op")
        if op == "pong":
            self._pongs[(index, int(msg.get("k", -1)))] = float(msg["t"])
        elif op == "ready":
            node.ready = True
        elif op == "addr":
            for other in self.nodes:
                if other is not node:
                    self._send(other, {"op": "addr", "file": msg.get("file"),
                                       "value": msg.get("value")})
        elif op == "result":
            self._results[int(msg.get("id", -1))] = msg
        elif op == "idle":
            node.idle = True
        elif op == "quiet":
            node.quiet = msg.get("quiet") is True
        elif op == "trace":
            node.lines.extend(str(line) for line in msg.get("lines", []))
        elif op == "file":
            node.files.setdefault(str(msg.get("name")), []).extend(
                str(line) for line in msg.get("lines", []))
        elif op == "done":
            node.report = dict(msg)
            node.done = node.idle = True
            node.exit_codes = {str(k): int(v) for k, v in msg.get("exit_codes", {}).items()}
            node.end, node.hung = float(msg.get("end", 0.0)), bool(msg.get("hung"))
        elif op in ("failed", "closed") and not node.done:
            node.failed = node.failed or str(msg.get("why", op))
            node.idle = True

    def _send(self, node: Node, msg: wire.Message) -> bool:
        if node.failed:
            return False
        try:
            node.chan.send(msg)
            return True
        except OSError as exc:
            node.failed, node.idle = f"send failed: {exc}", True
            return False

    def _wait(self, cond: Callable[[Node], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not all(cond(n) or n.failed for n in self.nodes):
            if time.monotonic() > deadline:
                late = [n.index for n in self.nodes if not (cond(n) or n.failed)]
                raise ClusterError(f"nodes {late} did not send {what} within {timeout:.0f}s")
            self._pump(deadline - time.monotonic())
        lost = [f"node {n.index}: {n.failed}" for n in self.nodes if n.failed]
        if lost and what != "its trace":
            raise ClusterError("; ".join(lost))

    def _sync_clocks(self) -> None:
        for node in self.nodes:
            for k in range(PROBES):
                sent = time.time()
                if not self._send(node, {"op": "ping", "k": k}):
                    break
                deadline = time.monotonic() + ANSWER_TIMEOUT
                while (node.index, k) not in self._pongs and not node.failed:
                    if time.monotonic() > deadline:
                        raise ClusterError(f"node {node.index} did not answer a clock probe")
                    self._pump(0.05)
                got = time.time()
                theirs = self._pongs.get((node.index, k))
                if theirs is not None and (got - sent) / 2 < node.uncertainty:
                    node.uncertainty = (got - sent) / 2
                    node.offset = theirs - (sent + got) / 2

    def _go(self) -> None:
        self.t0 = time.time() + GO_AHEAD
        for node in self.nodes:
            self._trace.event(0.0, "*", PROC, "clock_sync", {
                "node": node.index, "machine": node.machine, "address": node.address,
                "hosts": list(node.hosts), "offset": round(node.offset, 6),
                "uncertainty": round(node.uncertainty, 6)})
            self._send(node, {"op": "go", "t0": self.t0 + node.offset})

    def _supervise(self, injector: Injector) -> bool:
        """Fire faults until every node is idle or runs only daemons outside the job;
        True if the time limit came first."""
        while True:
            now = self._now()
            injector.fire_due(now)
            if all(n.idle for n in self.nodes):
                return False
            if all(n.idle or n.quiet for n in self.nodes):
                self.over = True
                return False
            if now >= self.world.time_limit:
                return True
            wake = min(injector.next_due(), self.world.time_limit)
            self._pump(min(max(0.0, wake - self._now()), 0.1))

    def _end(self, injector: Injector) -> None:
        kills = {
            "hosts": {h: {"t": k.t, "fault": k.fault_id} for h, k in injector.host_kills.items()},
            "procs": {p: {"t": k.t, "fault": k.fault_id} for p, k in injector.proc_kills.items()},
        }
        for node in self.nodes:
            self._send(node, {"op": "end", "kills": kills, "over": self.over})

    def _result(self, injector: Injector, hung: bool, end: float,
                emit: Callable[[TraceEvent], None]) -> RunResult:
        paths = [self.workdir / "trace" / "coordinator.jsonl"]
        codes: dict[str, int] = {}
        for node in self.nodes:
            path = self.workdir / "trace" / f"node{node.index}.jsonl"
            path.write_text("".join(line + "\n" for line in node.lines), encoding="utf-8")
            paths.append(path)
            codes.update(node.exit_codes)
            hung = hung or node.hung
            if node.failed:
                self.log(f"coordinator: node {node.index} ({node.machine}): {node.failed}")
        if not hung:
            end = max([end, *(n.end for n in self.nodes if n.done)])
        digest, count = hashlib.sha256(), 0
        for ev in merge(paths):
            emit(ev)
            digest.update((encode(ev) + "\n").encode())
            count += 1
        lost = [n.index for n in self.nodes if n.failed]
        if lost:
            raise ClusterError(f"nodes {lost} broke off; their traces are missing")
        return RunResult(exit_codes=codes, end_time=end, hung=hung,
                         faults=injector.reports(end), trace_sha256=digest.hexdigest(),
                         trace_events=count)

    # -- fault commands (the targets: :mod:`.forward`) -----------------------------------

    def _ask(self, node: Node, msg: wire.Message) -> wire.Message:
        """Send ``node`` a fault command; its answer (``ok``, and ``why`` when not)."""
        self._next_id += 1
        ident = self._next_id
        if not self._send(node, {**msg, "op": "cmd", "id": ident}):
            return {"ok": False, "why": f"node {node.index} is gone: {node.failed}"}
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while ident not in self._results:
            if node.failed or time.monotonic() > deadline:
                return {"ok": False, "why": f"node {node.index} did not answer"
                        f"{': ' + node.failed if node.failed else ''}"}
            self._pump(0.05)
        return self._results.pop(ident)
