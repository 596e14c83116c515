"""Fault types as data. Each runtime has its own injector for the same vocabulary.

Every fault has an ``id`` (unique in its schedule, used in the trace and the report) and a
time ``at`` (seconds of run time); faults that heal carry a ``duration``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fault:
    """Base: something that happens to the world at run time ``at``."""

    id: str
    at: float

    @property
    def type(self) -> str:
        """The scenario name of this fault type."""
        return FAULT_TYPES_BY_CLASS[type(self)]

    @property
    def heals_at(self) -> float | None:
        """When the fault ends, if it does."""
        return None

    def hosts(self) -> tuple[str, ...]:
        """The hosts this fault names (validated against the cluster)."""
        return ()


class OnHost:
    """Mixin: a fault that names one host (``host``)."""

    host: str

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)


class Healing:
    """Mixin: a fault that heals ``duration`` seconds after it starts."""

    at: float
    duration: float

    @property
    def heals_at(self) -> float | None:
        return self.at + self.duration



@dataclass(frozen=True)
class CrashHost(OnHost, Fault):
    """The machine dies: every process on it ends at once (SIGKILL), messages to it vanish,
    a store it hosts is gone."""

    host: str = ""


@dataclass(frozen=True)
class CrashProcess(Fault):
    """One process dies (SIGKILL); the host and its other processes live on."""

    proc: str = ""
    """``host/name``."""

    def hosts(self) -> tuple[str, ...]:
        return (self.proc.split("/", 1)[0],)


@dataclass(frozen=True)
class HangHost(OnHost, Healing, Fault):
    """The machine freezes (SIGSTOP of every process) for ``duration`` seconds, then resumes."""

    host: str = ""
    duration: float = 0.0


@dataclass(frozen=True)
class Partition(Healing, Fault):
    """The network is cut between ``groups`` (hosts in different groups cannot talk) for
    ``duration`` seconds; hosts in no group stay connected to everyone."""

    groups: tuple[tuple[str, ...], ...] = ()
    duration: float = 0.0

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for g in self.groups for h in g)

    def cut(self, a: str, b: str) -> bool:
        """Whether hosts ``a`` and ``b`` are on different sides of the cut."""
        ga = next((i for i, g in enumerate(self.groups) if a in g), None)
        gb = next((i for i, g in enumerate(self.groups) if b in g), None)
        return ga is not None and gb is not None and ga != gb


@dataclass(frozen=True)
class IsolateHost(Partition):
    """One host cut off from every other host (``groups`` = it against the rest)."""

    host: str = ""


@dataclass(frozen=True)
class IsolateStore(Partition):
    """The store host cut off from every other host."""

    host: str = ""


@dataclass(frozen=True)
class Bridge(Partition):
    """Two sides that cannot talk to each other, and ``bridge`` hosts (in no group) that
    still talk to both."""

    bridge: tuple[str, ...] = ()


@dataclass(frozen=True)
class OneWayPartition(Healing, Fault):
    """Packets from ``src`` hosts to ``dst`` hosts are dropped for ``duration`` seconds; the
    other direction still works. Connection-based traffic (store, collectives) needs both
    directions, so it stalls as under a full cut; one-way messages still flow dst -> src."""

    src: tuple[str, ...] = ()
    dst: tuple[str, ...] = ()
    duration: float = 0.0

    def hosts(self) -> tuple[str, ...]:
        return (*self.src, *self.dst)


@dataclass(frozen=True)
class CrashRestart(OnHost, Fault):
    """The host crashes, and after ``downtime`` comes back with fresh processes (as a
    scheduler restarts a pod): its first process starts again, a new incarnation."""

    host: str = ""
    downtime: float = 0.0

    @property
    def heals_at(self) -> float | None:
        return self.at + self.downtime


@dataclass(frozen=True)
class Straggler(OnHost, Healing, Fault):
    """The host computes ``factor`` times slower (its sleeps, which model compute, last
    ``factor`` times longer) for ``duration`` seconds."""

    host: str = ""
    factor: float = 2.0
    duration: float = 0.0


@dataclass(frozen=True)
class Preempt(OnHost, Fault):
    """Preemption with notice: SIGTERM to every process of the host, SIGKILL to what is left
    after ``grace`` seconds; the host is then gone."""

    host: str = ""
    grace: float = 30.0


@dataclass(frozen=True)
class LinkFault(Healing, Fault):
    """A bad link between hosts ``a`` and ``b`` (``*``: any host) for ``duration`` seconds:
    ``delay`` extra one-way seconds; messages lost with probability ``loss``, duplicated with
    ``duplicate``, and delayed by up to ``reorder`` extra seconds (so they overtake each
    other). Loss, duplication and reordering apply to messages; connection-based traffic
    (store, collectives) sees the delay only."""

    a: str = "*"
    b: str = "*"
    delay: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    duration: float = 0.0

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for h in (self.a, self.b) if h != "*")

    def applies(self, x: str, y: str) -> bool:
        """Whether traffic between hosts ``x`` and ``y`` (either direction) crosses it."""
        def end(pat: str, h: str) -> bool:
            return pat == "*" or pat == h
        return (end(self.a, x) and end(self.b, y)) or (end(self.a, y) and end(self.b, x))


@dataclass(frozen=True)
class ClockSkew(OnHost, Healing, Fault):
    """The host's wall clock is ``offset`` seconds off for ``duration`` seconds, then set
    right again (two steps of the wall clock; the monotonic clock never steps)."""

    host: str = ""
    offset: float = 0.0
    duration: float = 0.0


@dataclass(frozen=True)
class ClockJump(OnHost, Fault):
    """The host's wall clock steps by ``delta`` seconds for good (NTP step, ``date -s``)."""

    host: str = ""
    delta: float = 0.0


@dataclass(frozen=True)
class StoreCrash(OnHost, Fault):
    """The store server on ``host`` dies; the process that hosted it lives on."""

    host: str = ""


@dataclass(frozen=True)
class StoreFreeze(OnHost, Healing, Fault):
    """The store server on ``host`` stops answering for ``duration`` seconds (requests
    wait, and time out on the clients' own timeouts), then serves what waited."""

    host: str = ""
    duration: float = 0.0


@dataclass(frozen=True)
class CollectiveFault(OnHost, Fault):
    """The next collective a process of ``host`` enters (from ``at`` on) fails at once on that
    member (``mode`` "fail": it aborts, peers see a dead peer) or never completes (``mode``
    "hang": every member times out)."""

    host: str = ""
    mode: str = "fail"


@dataclass(frozen=True)
class ScaleUp(OnHost, Fault):
    """A new agent starts on ``host`` (one not running yet, or gone): the host's first
    process starts there, as an operator or autoscaler adding a node would."""

    host: str = ""


@dataclass(frozen=True)
class ScaleDown(OnHost, Fault):
    """``host`` is taken out of the job: its processes get SIGTERM, SIGKILL after ``grace``,
    and the host is gone."""

    host: str = ""
    grace: float = 0.0


@dataclass(frozen=True)
class DiscoveryAdd(OnHost, Fault):
    """From ``at`` on, the protocol's discovery source also reports ``host`` (with
    ``slots``; None: the source's default), until ``duration`` seconds later (None: for
    good). Membership grows through discovery, as when a scheduler adds a node."""

    host: str = ""
    slots: int | None = None
    duration: float | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration

    def line(self) -> str:
        """The ``host[:slots]`` line the discovery script prints for it."""
        return self.host if self.slots is None else f"{self.host}:{self.slots}"


@dataclass(frozen=True)
class DiscoveryRemove(OnHost, Fault):
    """From ``at`` on, the protocol's discovery source no longer reports ``host``, until
    ``duration`` seconds later (None: for good); the host itself keeps running."""

    host: str = ""
    duration: float | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration


@dataclass(frozen=True)
class DiscoveryScriptError(Healing, Fault):
    """Every discovery call made during ``duration`` seconds from ``at`` fails (the
    discovery script exits non-zero)."""

    duration: float = 0.0


@dataclass(frozen=True)
class DiscoveryScriptHang(Healing, Fault):
    """A discovery call made during ``duration`` seconds from ``at`` hangs: it returns
    only when the fault heals."""

    duration: float = 0.0


DISCOVERY_FAULTS: tuple[type[Fault], ...] = (
    DiscoveryAdd, DiscoveryRemove, DiscoveryScriptError, DiscoveryScriptHang)
"""Faults that act on a protocol's discovery source (what it reports), not on hosts."""


FAULT_TYPES: dict[str, type[Fault]] = {
    "crash": CrashHost,
    "crash_process": CrashProcess,
    "hang": HangHost,
    "partition": Partition,
    "isolate": IsolateHost,
    "isolate_store": IsolateStore,
    "bridge": Bridge,
    "one_way_partition": OneWayPartition,
    "crash_restart": CrashRestart,
    "straggler": Straggler,
    "preempt": Preempt,
    "link": LinkFault,
    "clock_skew": ClockSkew,
    "clock_jump": ClockJump,
    "store_crash": StoreCrash,
    "store_freeze": StoreFreeze,
    "collective": CollectiveFault,
    "scale_up": ScaleUp,
    "scale_down": ScaleDown,
    "discovery_add": DiscoveryAdd,
    "discovery_remove": DiscoveryRemove,
    "discovery_error": DiscoveryScriptError,
    "discovery_hang": DiscoveryScriptHang,
}
"""Scenario name -> fault class."""

FAULT_TYPES_BY_CLASS: dict[type[Fault], str] = {v: k for k, v in FAULT_TYPES.items()}
