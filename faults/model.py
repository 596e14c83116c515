"""Fault types as data: each type is one frozen dataclass, defined here once.

The class is the whole definition of a fault type: its scenario name (the ``tag`` it is
declared with, which registers it in :data:`FAULT_TYPES`), its fields with their domains
(pydantic constraints in the annotations, which the scenario schema validates YAML against
directly: :mod:`elastic_sim.fault_schema` derives its models from these classes), the
hosts it names, how it is placed in a cluster (:meth:`Fault.resolve`), its cross-field
rules (:meth:`Fault.problem`) and what its trace event names as target
(:meth:`Fault.target`, :meth:`Fault.where`). Each runtime has one handler table over
:data:`FAULT_TYPES` (``sim.faults``, ``real.injector``): inject it, or refuse it with the
reason.

Every fault has an ``id`` (unique in its schedule, used in the trace and the report) and a
time ``at`` (seconds of run time); faults that heal carry a ``duration``. A field the
scenario must give but which needs a default here (a dataclass field after one with a
default) carries :data:`NEEDED` as its metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import Field

FAULT_TYPES: dict[str, type[Fault]] = {}
"""Scenario name -> fault class, in declaration order (each class registers itself)."""

Time = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""Seconds of run time, or a non-negative span (finite)."""
Duration = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A span that must be positive (finite)."""
Offset = Annotated[float, Field(allow_inf_nan=False)]
"""Signed finite seconds (a clock step)."""
Probability = Annotated[float, Field(ge=0, le=1)]
HostName = Annotated[str, Field(min_length=1)]
HostList = Annotated[tuple[HostName, ...], Field(min_length=1)]
Side = Annotated[tuple[HostName, ...], Field(min_length=1)]


NEEDED = MappingProxyType({"needed": True})
"""Metadata of a field the scenario must give (its default only keeps the dataclass
legal: a field after one with a default needs one)."""


@dataclass(frozen=True)
class Refusal:
    """A runtime's handler for a fault type it cannot inject: the reason, said before or
    when the fault is due."""

    reason: str


H = TypeVar("H")


def handler_for(table: Mapping[type[Fault], H], cls: type[Fault]) -> H | None:
    """A runtime's handler for fault class ``cls`` in its ``table``: its own, else its
    nearest base's (isolate, isolate_store and bridge share the partition's)."""
    for klass in cls.__mro__:
        found = table.get(klass)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Placement:
    """What a fault is placed against: the cluster's hosts, in order, and the store host."""

    hosts: tuple[str, ...]
    store_host: str


@dataclass(frozen=True)
class Fault:
    """Base: something that happens to the world at run time ``at``."""

    id: str
    at: float

    scenario_type: ClassVar[str] = ""
    """The scenario name of the type (set by the ``tag`` a subclass is declared with)."""
    derived: ClassVar[tuple[str, ...]] = ()
    """Fields a scenario does not give: :meth:`resolve` computes them."""

    def __init_subclass__(cls, tag: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if tag:
            if tag in FAULT_TYPES:
                raise TypeError(f"fault type {tag!r} defined twice")
            cls.scenario_type = tag
            FAULT_TYPES[tag] = cls

    @property
    def type(self) -> str:
        """The scenario name of this fault type."""
        return self.scenario_type or type(self).__name__

    @property
    def heals_at(self) -> float | None:
        """When the fault ends, if it does."""
        return None

    def hosts(self) -> tuple[str, ...]:
        """The hosts this fault names (validated against the cluster)."""
        return ()

    def resolve(self, place: Placement) -> Fault:
        """This fault with its derived fields filled in for a cluster."""
        return self

    def problem(self) -> tuple[str, str] | None:
        """A cross-field rule this fault breaks: (field, what was expected), else None."""
        return None

    def target(self) -> Any:
        """What its trace event names as the target (plain JSON data)."""
        return getattr(self, "host", None)

    def where(self) -> str:
        """The host its trace event is on (``*``: no one host)."""
        host = getattr(self, "host", "")
        return host if isinstance(host, str) and host else "*"


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
class CrashHost(OnHost, Fault, tag="crash"):
    """The machine dies: every process on it ends at once (SIGKILL), messages to it vanish,
    a store it hosts is gone; peers' connections to it close at once (fast detection)."""

    host: HostName


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


@dataclass(frozen=True)
class CrashRestart(OnHost, Fault, tag="crash_restart"):
    """The host crashes, and after ``downtime`` comes back with fresh processes (as a
    scheduler restarts a pod): its first process starts again, a new incarnation."""

    host: HostName
    downtime: Time

    @property
    def heals_at(self) -> float | None:
        return self.at + self.downtime


@dataclass(frozen=True)
class Straggler(OnHost, Healing, Fault, tag="straggler"):
    """The host computes ``factor`` times slower (its sleeps, which model compute, last
    ``factor`` times longer) for ``duration`` seconds."""

    host: HostName
    factor: Annotated[float, Field(ge=1, allow_inf_nan=False)]
    duration: Duration


@dataclass(frozen=True)
class Preempt(OnHost, Fault, tag="preempt"):
    """Preemption with notice: SIGTERM to every process of the host, SIGKILL to what is left
    after ``grace`` seconds; the host is then gone."""

    host: HostName
    grace: Time = 30.0


@dataclass(frozen=True)
class Signal(OnHost, Fault, tag="signal"):
    """A named signal delivered to the host's agent or driver (``to: agent``, the host's
    first process) or to each of its workers (``to: workers``, every other process there).
    The protocol reacts as upstream's handlers do (torchrun: SIGTERM, SIGINT, SIGHUP and
    SIGQUIT raise SignalException once workers exist; SIGINT before that is a
    KeyboardInterrupt that closes the rendezvous); an unhandled one ends the process."""

    host: HostName
    signal: Literal["INT", "TERM", "HUP", "QUIT", "USR1", "USR2"]
    to: Literal["agent", "workers"] = "agent"


@dataclass(frozen=True)
class PowerOff(OnHost, Fault, tag="power_off"):
    """The machine stops dead: every process ends, and no FIN or RST ever leaves it. Peers
    are not told: their collectives and store calls with it wait for their own timeouts
    (the NCCL case, a powered-off Gloo peer), where a ``crash`` is seen at once."""

    host: HostName


@dataclass(frozen=True)
class Wedge(OnHost, Healing, Fault, tag="wedge"):
    """One activity of a process is stuck for ``duration`` seconds while the process and
    its other activities go on: an agent's main loop stuck while its heartbeat keeps
    beating, a worker stuck inside a collective while its process lives. Activities are
    the names a protocol gives its tasks (torchrun's agent: ``agent.invoke_run``,
    ``keep-alive``; every process: ``main``); ``proc`` (``host/name``) picks one process,
    default every process of the host that has the activity."""

    host: HostName
    activity: Annotated[str, Field(min_length=1)]
    duration: Duration
    proc: str = ""

    def problem(self) -> tuple[str, str] | None:
        if self.proc and self.proc.partition("/")[0] != self.host:
            return "proc", f"expected a process of {self.host} ('{self.host}/name'), got " \
                f"{self.proc!r}"
        return None


class CrashAtStart(Exception):
    """A process failing during its start-up (a crash loop): exit code 1."""


@dataclass(frozen=True)
class CrashLoop(OnHost, Fault, tag="crash_loop"):
    """The bad node: from ``at`` on, every process started on ``host`` (``to``: its
    ``workers``, its ``agent`` when it is started again, or ``any``) fails at start-up,
    exit code 1 once its interpreter has started, on each of the next ``starts`` starts
    (None: every start, for good)."""

    host: HostName
    to: Literal["workers", "agent", "any"] = "workers"
    starts: Annotated[int, Field(ge=1)] | None = None

    def hits(self, is_agent: bool) -> bool:
        """Whether a process of this kind (the host's first one, or not) is affected."""
        return self.to == "any" or (self.to == "agent") == is_agent


@dataclass(frozen=True)
class SlowStart(OnHost, Fault, tag="slow_start"):
    """From ``at`` on, every process started on ``host`` takes ``delay`` seconds longer to
    start (a slow disk, a cold container image, a loaded node): a worker joins its group
    that much later, an agent started again reaches its rendezvous that much later."""

    host: HostName
    delay: Duration


class BetweenHosts:
    """Mixin: a fault on the traffic between hosts ``a`` and ``b`` (``*``: any host)."""

    a: str
    b: str

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for h in (self.a, self.b) if h != "*")

    def applies(self, x: str, y: str) -> bool:
        """Whether traffic between hosts ``x`` and ``y`` (either direction) crosses it."""
        def end(pat: str, h: str) -> bool:
            return pat == "*" or pat == h
        return (end(self.a, x) and end(self.b, y)) or (end(self.a, y) and end(self.b, x))

    def target(self) -> Any:
        return [self.a, self.b]

    def where(self) -> str:
        return "*"


@dataclass(frozen=True)
class ConnReset(BetweenHosts, Fault, tag="conn_reset"):
    """Every established connection between hosts ``a`` and ``b`` (``*``: any host; never a
    host's loopback) is reset (RST) at once, while new ones can be opened: a store client's
    calls fail with a connection error (c10d's client does not reconnect), a process group
    with such a pair fails its calls on both ends (Gloo's pair sees ECONNRESET) and its
    other members see them leave. Unlike a partition, nothing is dropped afterwards."""

    a: HostName = "*"
    b: HostName = "*"


@dataclass(frozen=True)
class LinkFault(BetweenHosts, Healing, Fault, tag="link"):
    """A bad link between hosts ``a`` and ``b`` (``*``: any host) for ``duration`` seconds:
    ``delay`` extra one-way seconds; messages lost with probability ``loss``, duplicated with
    ``duplicate``, and delayed by up to ``reorder`` extra seconds (so they overtake each
    other). Loss, duplication and reordering apply to messages; connection-based traffic
    (store, collectives) sees the delay only."""

    a: HostName = "*"
    b: HostName = "*"
    delay: Time = 0.0
    loss: Probability = 0.0
    duplicate: Probability = 0.0
    reorder: Time = 0.0
    duration: Duration = field(default=0.0, metadata=NEEDED)



@dataclass(frozen=True)
class ClockSkew(OnHost, Healing, Fault, tag="clock_skew"):
    """The host's wall clock is ``offset`` seconds off for ``duration`` seconds, then set
    right again (two steps of the wall clock; the monotonic clock never steps)."""

    host: HostName
    offset: Offset
    duration: Duration


@dataclass(frozen=True)
class ClockJump(OnHost, Fault, tag="clock_jump"):
    """The host's wall clock steps by ``delta`` seconds for good (NTP step, ``date -s``)."""

    host: HostName
    delta: Offset


@dataclass(frozen=True)
class StoreCrash(OnHost, Fault, tag="store_crash"):
    """The store server on ``host`` (default: the store host) dies; the process that hosted
    it lives on."""

    host: str = ""

    def resolve(self, place: Placement) -> Fault:
        return self if self.host else _replace(self, host=place.store_host)


@dataclass(frozen=True)
class StoreFreeze(OnHost, Healing, Fault, tag="store_freeze"):
    """The store server on ``host`` (default: the store host) stops answering for
    ``duration`` seconds (requests wait, and time out on the clients' own timeouts), then
    serves what waited."""

    host: str = ""
    duration: Duration = field(default=0.0, metadata=NEEDED)

    def resolve(self, place: Placement) -> Fault:
        return self if self.host else _replace(self, host=place.store_host)


@dataclass(frozen=True)
class CollectiveFault(OnHost, Fault, tag="collective"):
    """The next collective a process of ``host`` enters (from ``at`` on) fails at once on that
    member (``mode`` "fail": it aborts, peers see a dead peer) or never completes (``mode``
    "hang": every member times out)."""

    host: HostName
    mode: Literal["fail", "hang"] = "fail"


@dataclass(frozen=True)
class ScaleUp(OnHost, Fault, tag="scale_up"):
    """A new agent starts on ``host`` (one not running yet, or gone): the host's first
    process starts there, as an operator or autoscaler adding a node would."""

    host: HostName


@dataclass(frozen=True)
class ScaleDown(OnHost, Fault, tag="scale_down"):
    """``host`` is taken out of the job: its processes get SIGTERM, SIGKILL after ``grace``,
    and the host is gone."""

    host: HostName
    grace: Time = 0.0


@dataclass(frozen=True)
class DiscoveryAdd(OnHost, Fault, tag="discovery_add"):
    """From ``at`` on, the protocol's discovery source also reports ``host`` (with
    ``slots``; None: the source's default), until ``duration`` seconds later (None: for
    good). Membership grows through discovery, as when a scheduler adds a node."""

    host: HostName
    slots: Annotated[int, Field(ge=1)] | None = None
    duration: Duration | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration

    def line(self) -> str:
        """The ``host[:slots]`` line the discovery script prints for it."""
        return self.host if self.slots is None else f"{self.host}:{self.slots}"


@dataclass(frozen=True)
class DiscoveryRemove(OnHost, Fault, tag="discovery_remove"):
    """From ``at`` on, the protocol's discovery source no longer reports ``host``, until
    ``duration`` seconds later (None: for good); the host itself keeps running."""

    host: HostName
    duration: Duration | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration


@dataclass(frozen=True)
class DiscoveryScriptError(Healing, Fault, tag="discovery_error"):
    """Every discovery call made during ``duration`` seconds from ``at`` fails (the
    discovery script exits non-zero)."""

    duration: Duration


@dataclass(frozen=True)
class DiscoveryScriptHang(Healing, Fault, tag="discovery_hang"):
    """A discovery call made during ``duration`` seconds from ``at`` hangs: it returns
    only when the fault heals."""

    duration: Duration


DISCOVERY_FAULTS: tuple[type[Fault], ...] = (
    DiscoveryAdd, DiscoveryRemove, DiscoveryScriptError, DiscoveryScriptHang)
"""Faults that act on a protocol's discovery source (what it reports), not on hosts."""


def _replace(f: Fault, **changes: Any) -> Fault:
    return replace(f, **changes)
