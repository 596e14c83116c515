"""Fault types that take hosts down or cut them off: crash, crash_process, hang and the
partitions (partition, isolate, isolate_store, bridge, one_way_partition).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import Field

from elastic_sim.faults.base import (
    NEEDED,
    Duration,
    Fault,
    Healing,
    HostList,
    HostName,
    OnHost,
    Placement,
    Side,
    _replace,
)


@dataclass(frozen=True)
class CrashHost(OnHost, Fault, tag="crash"):
    """The machine dies: every process on it ends at once (SIGKILL), messages to it vanish,
    a store it hosts is gone; peers' connections to it close at once (fast detection)."""

    host: HostName
    ends_host: ClassVar[bool] = True


@dataclass(frozen=True)
class CrashProcess(Fault, tag="crash_process"):
    """One process dies (SIGKILL); the host and its other processes live on."""

    proc: Annotated[str, Field(min_length=1)]
    """``host/name``."""

    def hosts(self) -> tuple[str, ...]:
        return (self.proc.split("/", 1)[0],)

    def problem(self) -> tuple[str, str] | None:
        if not self.proc.partition("/")[2]:
            return "proc", f"expected 'host/name', got {self.proc!r}"
        return None

    def target(self) -> Any:
        return self.proc

    def where(self) -> str:
        return self.hosts()[0]


@dataclass(frozen=True)
class HangHost(OnHost, Healing, Fault, tag="hang"):
    """The machine freezes (SIGSTOP of every process) for ``duration`` seconds, then resumes."""

    host: HostName
    duration: Duration


Groups = Annotated[tuple[Side, ...], Field(min_length=2)]
TwoSides = Annotated[tuple[Side, ...], Field(min_length=2, max_length=2)]


@dataclass(frozen=True)
class Partition(Healing, Fault, tag="partition"):
    """The network is cut between ``groups`` (hosts in different groups cannot talk) for
    ``duration`` seconds; hosts in no group stay connected to everyone."""

    groups: Groups = field(default=(), metadata=NEEDED)
    duration: Duration = field(default=0.0, metadata=NEEDED)

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for g in self.groups for h in g)

    def problem(self) -> tuple[str, str] | None:
        seen: dict[str, int] = {}
        for g, group in enumerate(self.groups):
            for j, h in enumerate(group):
                if seen.get(h, g) != g:
                    return (f"groups[{g}][{j}]", f"host {h!r} is in groups[{seen[h]}] and "
                            f"groups[{g}]: a host cannot be on both sides of a cut")
                seen.setdefault(h, g)
        return None

    def cut(self, a: str, b: str) -> bool:
        """Whether hosts ``a`` and ``b`` are on different sides of the cut."""
        ga = next((i for i, g in enumerate(self.groups) if a in g), None)
        gb = next((i for i, g in enumerate(self.groups) if b in g), None)
        return ga is not None and gb is not None and ga != gb

    def target(self) -> Any:
        return [list(g) for g in self.groups]

    def where(self) -> str:
        return "*"


@dataclass(frozen=True)
class IsolateHost(Partition, tag="isolate"):
    """One host cut off from every other host (``groups`` = it against the rest)."""

    host: HostName = field(default="", metadata=NEEDED)
    derived: ClassVar[tuple[str, ...]] = ("groups",)

    def resolve(self, place: Placement) -> Fault:
        rest = tuple(h for h in place.hosts if h != self.host)
        return _replace(self, groups=((self.host,), rest))


@dataclass(frozen=True)
class IsolateStore(Partition, tag="isolate_store"):
    """The store host cut off from every other host."""

    host: str = ""
    derived: ClassVar[tuple[str, ...]] = ("groups", "host")

    def resolve(self, place: Placement) -> Fault:
        rest = tuple(h for h in place.hosts if h != place.store_host)
        return _replace(self, groups=((place.store_host,), rest), host=place.store_host)


@dataclass(frozen=True)
class Bridge(Partition, tag="bridge"):
    """Two sides that cannot talk to each other, and ``bridge`` hosts (in no group) that
    still talk to both."""

    groups: TwoSides = field(default=(), metadata=NEEDED)
    bridge: HostList = field(default=(), metadata=NEEDED)


@dataclass(frozen=True)
class OneWayPartition(Healing, Fault, tag="one_way_partition"):
    """Packets from ``src`` hosts to ``dst`` hosts are dropped for ``duration`` seconds; the
    other direction still works. Connection-based traffic (store, collectives) needs both
    directions, so it stalls as under a full cut; one-way messages still flow dst -> src."""

    src: HostList
    dst: HostList
    duration: Duration

    def hosts(self) -> tuple[str, ...]:
        return (*self.src, *self.dst)

    def problem(self) -> tuple[str, str] | None:
        both = sorted(set(self.src) & set(self.dst))
        return ("dst", f"hosts {both} are in both src and dst") if both else None

    def target(self) -> Any:
        return {"src": list(self.src), "dst": list(self.dst)}

    def where(self) -> str:
        return "*"
