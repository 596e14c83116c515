"""Facts the checks share, read from the trace alone: the run's knobs and the limits they
imply (world size bounds in hosts, the restart budget, time bounds), and the cluster as the
trace shows it at any instant (which hosts are alive, frozen, cut off from the
coordinator, or were hit by a fault). Protocol-neutral: each protocol's vocabulary
(:mod:`elastic_sim.vocabulary`) maps its knobs to the same few quantities, once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.faults.model import (
    DISCOVERY_FAULTS,
    FAULT_TYPES,
    BetweenHosts,
    Fault,
    OneWayPartition,
    Partition,
    StoreCrash,
)
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import vocabulary_for

TERMINAL = ("job_done", "job_failed")
PROGRESS = ("step", "commit", "job_done")
"""What counts as training progress (a failed job is not progress)."""
PARTITIONS = tuple(t for t, c in FAULT_TYPES.items() if issubclass(c, Partition))
"""Fault types that cut the network between groups of hosts (``target``: the groups)."""
ONE_WAY = tuple(t for t, c in FAULT_TYPES.items() if issubclass(c, OneWayPartition))
"""Fault types that drop one direction (``target``: {src, dst}); connection-based traffic
needs both directions, so src and dst are cut from each other as by a partition."""
BETWEEN = tuple(t for t, c in FAULT_TYPES.items() if issubclass(c, BetweenHosts))
"""Fault types on the traffic between two hosts (``target``: [a, b], ``*`` any host): the
hosts at both ends were hit."""
NOT_ON_HOSTS = ("scale_up", *tuple(c.scenario_type for c in DISCOVERY_FAULTS))
"""Fault types that hurt no host: a host added, or what discovery reports changed."""
HOST_FAULTS = tuple(t for t in FAULT_TYPES
                    if t not in PARTITIONS + ONE_WAY + BETWEEN + NOT_ON_HOSTS)
"""Fault types that hit the host (or process) they target (a host so hit did fail): every
type but the network's and those that hurt no host, derived from the fault vocabulary so
a new type is never silently ignored."""
INSTANT = tuple(t for t, c in FAULT_TYPES.items()
                if c.heals_at is Fault.heals_at or t in ("discovery_add", "discovery_remove"))
"""Fault types that happen at an instant: never "in force" (a crash does not heal; a
discovery change is a new state of the world, not a fault in force)."""
STORE_ENDS = tuple(t for t, c in FAULT_TYPES.items() if issubclass(c, StoreCrash))
"""Fault types that end the store server on their host while the host lives on: on the
coordinator's host, no host can go on (a store client never reconnects)."""
TOLD_TO_LEAVE = tuple(t for t, c in FAULT_TYPES.items() if c.tells_to_leave)
"""Fault types that tell a host's processes to end (a signal, a preemption or scale-down
notice): the host's own failure that follows is its leaving, not the job failing."""


def host_of(proc_or_member: str) -> str:
    """The host of a process name (``h0/w0``) or member address (``h0:29500``)."""
    return str(proc_or_member).split("/", 1)[0].split(":", 1)[0]


def cut_groups(ev: TraceEvent) -> list[list[str]] | None:
    """The groups a network-cutting fault event separates (a partition's groups, a one-way
    partition's src and dst), else None."""
    target = ev.get("target")
    if ev.get("type") in PARTITIONS and isinstance(target, list):
        return [[str(h) for h in g] for g in target if isinstance(g, list)]
    if ev.get("type") in ONE_WAY and isinstance(target, dict):
        return [[str(h) for h in target.get("src", [])], [str(h) for h in target.get("dst", [])]]
    return None


def run_start(events: Sequence[TraceEvent]) -> TraceEvent | None:
    """The run's ``run_start`` event."""
    return neutral(events).first("run_start")


def protocol_named(events: Sequence[TraceEvent]) -> str | None:
    """The protocol ``run_start`` names (None: none)."""
    start = run_start(events)
    name = start.get("protocol") if start is not None else None
    return str(name) if name else None


def knobs_of(events: Sequence[TraceEvent]) -> Mapping[str, Any]:
    """The protocol's knobs as ``run_start`` records them (empty when unrecorded)."""
    start = run_start(events)
    return (start.get("knobs") or {}) if start is not None else {}


@dataclass(frozen=True)
class Limits:
    """What a protocol's knobs promise, in protocol-neutral terms."""

    min_hosts: int
    """Fewest hosts the job may continue with."""
    max_hosts: int | None
    """Most hosts a world may hold (None: unbounded)."""
    restart_budget: int | None
    """Failures the job may absorb (per host's agent, or for the job; None: unbounded)."""
    budget_per_host: bool
    """Whether the budget is spent per host (by each host's agent) or by the job."""
    settle_s: float
    """Seconds within which an available host must be brought into the world once the
    cluster is quiet: the protocol's polling, heartbeat and rendezvous periods, taken
    twice, plus the time a member needs to see its old group broken (the process-group
    timeout): how long a round may take to form."""
    progress_s: float
    """Seconds within which a job must progress or end with an error after a fault starts
    or heals: each phase of a recovery once (detecting the failure, stopping, waiting for
    a world to form, or for hosts up to the join deadline), each at its longest."""
    wait_s: float = 0.0
    """Seconds a host waiting for a world to form waits for more hosts before it gives up
    (the join deadline): a host that starts within it still counts as capacity."""
    progress_by: str = ""
    """What :attr:`progress_s` is made of, in the knobs' names and values (a violation
    states it)."""
    rejoin_s: float | None = None
    """Seconds within which, once a member's host has died and enough hosts could go on,
    the survivors form a new world or progress: what the protocol can see of the death
    (its heartbeat expiry, its polls, its last call). None: the protocol sees a death only
    through a timeout (:attr:`progress_s` bounds it then)."""
    rejoin_by: str = ""
    """What :attr:`rejoin_s` is made of, in the knobs' names and values."""
    discovered: bool = False
    """Whether hosts are offered to the job by a discovery (Horovod's): none is waiting to
    be incorporated before its first answer (a job may still fail avoidably then: every
    host counts as capacity until a discovery says otherwise)."""
    slots_listed: bool = False
    """Whether a world's membership lists a host once per slot it holds (Horovod's, one
    rank per slot), not once per host."""


def limits_of(knobs: Mapping[str, Any], protocol: str | None = None) -> Limits | None:
    """The limits these knobs promise, read by the vocabulary of ``protocol`` (None: by
    that of the built-in protocol whose knobs they are), or None for knobs it cannot
    read."""
    got = vocabulary_for(protocol).limits(knobs)
    return None if got is None else Limits(**got)


def run_limits(events: Sequence[TraceEvent]) -> Limits | None:
    """The limits the run's knobs promise, read by the vocabulary of its protocol."""
    return limits_of(knobs_of(events), protocol_named(events))


@dataclass
class Cluster:
    """The cluster as the trace shows it so far: feed events in order with :meth:`see`.

    A host is *alive* while its first process (``<host>/main``: the agent, driver or task
    service) runs; *frozen* while a hang fault holds it; *cut* from another while an active
    partition separates them; *faulted* once any fault has targeted it."""

    coordinator: str | None = None
    """The host the others must reach (the store or driver host), as run_start names it."""
    alive: dict[str, bool] = field(default_factory=dict)
    frozen: dict[str, int] = field(default_factory=dict)
    cuts: dict[str, list[list[str]]] = field(default_factory=dict)
    faulted: dict[str, TraceEvent] = field(default_factory=dict)
    """Host -> the first event that shows it failed (a fault on it or its links, an injected
    failure of its worker; a fault on any host's links hits every host up while it lasts)."""
    active: dict[str, TraceEvent] = field(default_factory=dict)
    """Fault id -> its start, while the fault is in force."""
    last_hit: dict[str, TraceEvent] = field(default_factory=dict)
    """Host -> the latest event that shows it failed (as :attr:`faulted`, but the last)."""
    leaving: dict[str, TraceEvent] = field(default_factory=dict)
    """Host -> the first fault that told its processes to end (:data:`TOLD_TO_LEAVE`)."""
    store_lost: TraceEvent | None = None
    """The fault that ended the coordinator's store while its host lived on
    (:data:`STORE_ENDS`), until the host's first process starts again with a new one."""

    def see(self, ev: TraceEvent) -> None:
        """Take one event into account."""
        if ev.kind == "run_start":
            coord = ev.get("coordinator")
            self.coordinator = str(coord) if coord else None
        elif ev.kind in ("proc_start", "proc_exit") and ev.proc == f"{ev.host}/main":
            self.alive[ev.host] = ev.kind == "proc_start"
            if ev.kind == "proc_start" and ev.host == self.coordinator:
                self.store_lost = None
            if ev.kind == "proc_start":  # a host that starts under a fault on any host's links
                for fault in self.active.values():
                    ends = fault.get("target")
                    if (fault.get("type") in BETWEEN and isinstance(ends, list)
                            and "*" in ends):
                        self.faulted.setdefault(ev.host, fault)
                        break
        elif ev.kind == "injected_failure":
            self.faulted.setdefault(ev.host, ev)
            self.last_hit[ev.host] = ev
        elif ev.kind == "fault":
            self._fault(ev)

    def _fault(self, ev: TraceEvent) -> None:
        fid, kind, target, phase = (str(ev.get("id")), ev.get("type"), ev.get("target"),
                                    ev.get("phase"))
        if phase not in ("start", "heal"):
            return
        if phase == "start" and kind not in INSTANT:
            self.active[fid] = ev
        else:
            self.active.pop(fid, None)
        groups = cut_groups(ev)
        if groups is not None:
            if phase == "start":
                self.cuts[fid] = groups
                for group in groups:
                    for h in group:
                        self.faulted.setdefault(h, ev)
                        self.last_hit[h] = ev
            else:
                self.cuts.pop(fid, None)
        elif kind in BETWEEN and isinstance(target, list):
            if phase == "start":
                ends = {str(h) for h in target}
                # "*": every host up now (and, while it lasts, every host that starts: see)
                hit = (set(self.alive) | (ends - {"*"})) if "*" in ends else ends
                for h in sorted(hit):
                    self.faulted.setdefault(h, ev)
                    self.last_hit[h] = ev
        elif kind in HOST_FAULTS and isinstance(target, str):
            host = host_of(target)
            if phase == "start":
                self.faulted.setdefault(host, ev)
                self.last_hit[host] = ev
                if kind in TOLD_TO_LEAVE:
                    self.leaving.setdefault(host, ev)
                if kind in STORE_ENDS and host == self.coordinator:
                    self.store_lost = ev
            if kind == "hang":
                self.frozen[host] = self.frozen.get(host, 0) + (1 if phase == "start" else -1)

    def is_alive(self, host: str) -> bool:
        """Its first process runs (hosts never started count as not alive)."""
        return self.alive.get(host, False)

    def is_frozen(self, host: str) -> bool:
        """A hang fault holds it now."""
        return self.frozen.get(host, 0) > 0

    def is_cut(self, a: str, b: str) -> bool:
        """An active partition separates ``a`` from ``b``."""
        for groups in self.cuts.values():
            ga = next((i for i, g in enumerate(groups) if a in g), None)
            gb = next((i for i, g in enumerate(groups) if b in g), None)
            if ga is not None and gb is not None and ga != gb:
                return True
        return False

    def reachable(self, host: str) -> bool:
        """Alive, not frozen, and not cut off from the coordinator (nor is the coordinator's
        host gone)."""
        if not self.is_alive(host) or self.is_frozen(host):
            return False
        coord = self.coordinator
        if coord is None or coord == host:
            return True
        return not self.is_cut(host, coord)

    def usable(self, host: str) -> bool:
        """Reachable, and the coordinator's store not lost: a host the job could continue
        on."""
        return self.store_lost is None and self.reachable(host)

    def usable_hosts(self) -> list[str]:
        """Every usable host, sorted."""
        return sorted(h for h in self.alive if self.usable(h))


def fault_events(events: Sequence[TraceEvent]) -> list[TraceEvent]:
    """Every fault start and heal, in order."""
    return [e for e in neutral(events).of("fault") if e.get("phase") in ("start", "heal")]


def last_quiet_point(events: Sequence[TraceEvent]) -> float:
    """When the last fault started or healed (0 without faults): the cluster is quiet
    after it, apart from faults that never heal."""
    faults = fault_events(events)
    return faults[-1].t if faults else 0.0


def run_end(events: Sequence[TraceEvent]) -> TraceEvent | None:
    """The run's ``run_end`` event."""
    return neutral(events).last("run_end")
