"""A real network cut for real mode: one private network namespace per run.

A run with partition faults puts every host's processes into one network namespace of its
own, where only loopback exists. Each host gets its own loopback address (its servers bind
to it) and its own group id (its sockets carry it). An nftables table marks every new
connection with the originating host (by the socket's group id); a cut is then a set of
rules, in the input hook, dropping the packets of connections between the two sides, found
by (originating host, original destination address) and, for a one-way cut, the direction.
Dropped, not refused: TCP connections stall until the heal or their own timeouts, as under
a real cut. Link faults shape the same connections with ``tc netem``
(:mod:`.shaping`), and a connection reset aborts them with ``ss -K`` (:mod:`.connreset`).
Deleting the namespace at the end removes every rule with it; one left by a launcher that
was SIGKILLed (so could not clean up) is deleted by the next run's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elastic_sim.faults.model import (
    ConnReset,
    Fault,
    LinkFault,
    OneWayPartition,
    Partition,
    PowerOff,
)
from elastic_sim.real.faults import connreset, shaping

CUT_TYPES = (Partition, OneWayPartition, PowerOff)
"""Fault types cut by nftables rules (isolate, isolate_store and bridge are partitions; a
power-off cuts its host from all others before its processes are killed, so no FIN or RST
reaches a peer)."""

NET_TYPES = (*CUT_TYPES, LinkFault, ConnReset)
"""Fault types that need the run's namespace: cuts, link faults (shaped with tc netem) and
connection resets."""

GID_BASE = 47000
"""Host ``i``'s processes run with group id ``GID_BASE + i`` (and stay uid 0)."""

TABLE = "elastic_sim"
"""The nftables table of a run's namespace."""


def needs_cut(faults: Iterable[Fault]) -> bool:
    """Whether any of ``faults`` needs the run's network namespace (a cut, a link fault,
    a connection reset)."""
    return any(isinstance(f, NET_TYPES) for f in faults)


def missing() -> str:
    """What this machine lacks for a network cut ("" if nothing)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating a network namespace needs root"
    lacking = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if lacking:
        return f"the {' and '.join(repr(t) for t in lacking)} command is not installed"
    return ""


def host_address(index: int) -> str:
    """Loopback address of the world's host number ``index`` (127.0.1.1 for the first)."""
    if not 0 <= index < 254 * 254:
        raise ValueError(f"host index {index}: out of range for a loopback address")
    return f"127.0.{1 + index // 254}.{1 + index % 254}"


@dataclass(frozen=True)
class Drop:
    """Drop the packets of connections that host mark ``origin`` opened to ``dest``;
    ``direction`` "original"/"reply" keeps one direction of them, "" both."""

    origin: int
    dest: str
    direction: str = ""

    def rule(self) -> str:
        """This drop as an nftables rule body."""
        way = f" ct direction {self.direction}" if self.direction else ""
        return f"ct mark {self.origin} ct original ip daddr {self.dest}{way} drop"


def drops(fault: Fault, hosts: Sequence[str]) -> list[Drop]:
    """The drops that make ``fault``'s cut among the world's ``hosts`` (in order)."""
    index = {h: i for i, h in enumerate(hosts)}
    out: list[Drop] = []
    if isinstance(fault, Partition | PowerOff):
        for a in hosts:
            for b in hosts:
                if _cut(fault, a, b):  # a opened it to b: both directions go
                    out.append(Drop(index[a] + 1, host_address(index[b])))
    elif isinstance(fault, OneWayPartition):
        for s in fault.src:
            for d in fault.dst:
                if s == d:
                    continue
                si, di = index[s], index[d]
                out.append(Drop(si + 1, host_address(di), "original"))  # s -> d, s opened
                out.append(Drop(di + 1, host_address(si), "reply"))  # s -> d, d opened
    else:
        raise TypeError(f"{type(fault).__name__} is not a network cut")
    return out


def _cut(fault: Partition | PowerOff, a: str, b: str) -> bool:
    if isinstance(fault, PowerOff):
        return a != b and fault.host in (a, b)
    return fault.cut(a, b)


def ruleset(count: int, cuts: Sequence[Drop], steers: Sequence[shaping.Steer] = ()) -> str:
    """The whole nftables table of a namespace for ``count`` hosts under ``cuts``, with
    the packets of link faults steered to their netem classes."""
    marks = "\n".join(
        [f"    ct state new meta skgid {GID_BASE + i} ct mark set {i + 1}" for i in range(count)]
        + [f"    {s.rule()}" for s in steers]
    )
    drops_ = "\n".join(f"    {d.rule()}" for d in cuts)
    return (
        f"table inet {TABLE} {{\n"
        "  chain origin {\n    type filter hook output priority 0; policy accept;\n"
        f"{marks}\n  }}\n"
        "  chain cut {\n    type filter hook input priority 0; policy accept;\n"
        f"{drops_}\n  }}\n}}\n"
    )


class CutError(RuntimeError):
    """An ``ip``/``nft`` command failed."""


def _run(argv: Sequence[str], stdin: str = "") -> None:
    done = subprocess.run(
        list(argv), input=stdin.encode(), capture_output=True, timeout=30, check=False
    )
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        raise CutError(f"{' '.join(argv)}: exit {done.returncode}: {err}")


def existing() -> list[str]:
    """Names of the network namespaces this machine has (``ip netns list``)."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=30, check=False)
    return [line.split()[0] for line in done.stdout.decode().splitlines() if line.strip()]


class Namespace:
    """A run's network namespace: created, cut and healed, deleted."""

    PREFIX = "es-"
    """Names of namespaces of real runs start with this."""

    def __init__(self, hosts: Sequence[str], tag: str) -> None:
        self.hosts = tuple(hosts)
        self.name = f"{self.PREFIX}{os.getpid()}-{tag}"
        self._active: dict[str, list[Drop]] = {}
        self._steers: dict[str, list[shaping.Steer]] = {}
        self._classes: dict[str, int] = {}
        """Link fault id -> the minor number of its netem class (kept after the heal)."""
        self.created = False

    def addresses(self) -> dict[str, str]:
        """Host name -> its loopback address here."""
        return {h: host_address(i) for i, h in enumerate(self.hosts)}

    def gid(self, host: str) -> int:
        """The group id ``host``'s processes run with."""
        return GID_BASE + self.hosts.index(host)

    def prefix(self) -> list[str]:
        """Command prefix that runs a program inside the namespace (it execs it)."""
        return ["ip", "netns", "exec", self.name]

    def create(self) -> None:
        """Create the namespace, bring its loopback up, load the marking table (first
        deleting namespaces left by launchers that died without cleaning up)."""
        sweep_stale()
        _run(["ip", "netns", "add", self.name])
        self.created = True
        _run(["ip", "-n", self.name, "link", "set", "lo", "up"])
        self._load()

    def cut(self, fault: Fault) -> None:
        """Start dropping ``fault``'s packets."""
        self._active[fault.id] = drops(fault, self.hosts)
        self._load()

    def heal(self, fault: Fault) -> None:
        """Stop dropping ``fault``'s packets (other cuts stay)."""
        self._active.pop(fault.id, None)
        self._load()

    def shape(self, fault: LinkFault) -> None:
        """Start shaping the traffic ``fault`` applies to with its netem class."""
        if not self._classes:
            self._tc(shaping.root_commands())
        minor = self._classes.setdefault(fault.id, shaping.FIRST_CLASS + len(self._classes))
        self._tc(shaping.class_commands(minor, fault))
        addresses = [host_address(i) for i in range(len(self.hosts))]
        self._steers[fault.id] = shaping.steers(fault, self.hosts, addresses, minor)
        self._load()

    def unshape(self, fault: LinkFault) -> None:
        """Stop shaping it: its packets leave unshaped, what its class holds drains."""
        self._steers.pop(fault.id, None)
        self._load()
        if fault.id in self._classes:
            self._tc(shaping.heal_commands(self._classes[fault.id]))

    def reset(self, fault: ConnReset) -> int:
        """Reset every established connection between the fault's hosts now; how many."""
        done = subprocess.run([*self.prefix(), "cat", "/proc/net/nf_conntrack"],
                              capture_output=True, timeout=30, check=False)
        if done.returncode != 0:
            raise CutError(f"reading the conntrack table: {done.stderr.decode().strip()}")
        addresses = [host_address(i) for i in range(len(self.hosts))]
        conns = connreset.between(fault, connreset.parse_conntrack(done.stdout.decode()),
                                  self.hosts, addresses)
        for expr in connreset.kill_filters(conns):
            _run([*self.prefix(), "ss", "-K", "-t", "-n", expr])
        return len(conns)

    def _tc(self, commands: Sequence[Sequence[str]]) -> None:
        for argv in commands:
            _run([*self.prefix(), "tc", *argv])

    def _load(self) -> None:
        cuts = [d for fid in sorted(self._active) for d in self._active[fid]]
        steers = [s for fid in sorted(self._steers) for s in self._steers[fid]]
        text = ruleset(len(self.hosts), cuts, steers)
        flush = f"table inet {TABLE}\ndelete table inet {TABLE}\n"  # atomic replace
        _run([*self.prefix(), "nft", "-f", "-"], flush + text)

    def delete(self) -> None:
        """Delete the namespace (its rules go with it); idempotent."""
        if self.created and self.name in existing():
            _run(["ip", "netns", "del", self.name])
        self.created = False


def cut_or_heal(ns: Namespace | None, fault: Fault, heal: bool) -> str:
    """Start (or, with ``heal``, stop) dropping ``fault``'s packets in a run's namespace;
    "" if done, else why not (what a launcher's ``cut``/``heal`` answer the injector)."""
    if ns is None:
        return "the run has no network namespace"
    try:
        if isinstance(fault, LinkFault):
            (ns.unshape if heal else ns.shape)(fault)
        elif heal:
            ns.heal(fault)
        else:
            ns.cut(fault)
    except CutError as exc:
        return str(exc)
    return ""


def reset_between(ns: Namespace | None, fault: ConnReset) -> tuple[str, int]:
    """Reset ``fault``'s established connections in a run's namespace: ("" if done, else
    why not; how many were reset)."""
    if ns is None:
        return "the run has no network namespace", 0
    try:
        return "", ns.reset(fault)
    except CutError as exc:
        return str(exc), 0


def _creator(name: str) -> int | None:
    """The launcher pid in a run namespace's name (``es-<pid>-<tag>``, the tag letters and
    digits); None if not one."""
    parts = name.removeprefix(Namespace.PREFIX).split("-")
    if not name.startswith(Namespace.PREFIX) or len(parts) != 2:
        return None
    return int(parts[0]) if parts[0].isdigit() and parts[1].isalnum() else None


def sweep_stale() -> list[str]:
    """Delete run namespaces whose launcher is gone; their names."""
    gone = []
    for name in existing():
        pid = _creator(name)
        if pid is not None and not os.path.exists(f"/proc/{pid}"):
            try:
                _run(["ip", "netns", "del", name])
            except CutError:
                continue  # another launcher swept it first
            gone.append(name)
    return gone


def rules_of(name: str) -> str:
    """The nftables ruleset of namespace ``name`` ("" when it has none or is gone)."""
    done = subprocess.run(
        ["ip", "netns", "exec", name, "nft", "list", "ruleset"],
        capture_output=True, timeout=30, check=False,
    )
    return done.stdout.decode() if done.returncode == 0 else ""

