"""The job's capacity to go on, as the trace shows it at any instant: which hosts are
usable (alive, not frozen, reachable from the coordinator), still offered to the job (not
dropped by discovery, not evicted after failing) and have restart budget left if they need
a restart, and which hosts will still arrive before a waiting host's join deadline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from elastic_sim.checks.facts import Cluster, Limits, host_of, run_end, run_limits
from elastic_sim.history import Key, merged, neutral
from elastic_sim.trace import TraceEvent

WORLD = ("rdzv_done", "epoch_assigned")
"""Events that form a world: a member's epoch, a coordinator's assignment."""
FAILED = ("coll_fail", "group_failed", "injected_failure", "worker_error", "abort")
"""Events that show a host's workers failed (so do a failure restart and a process that
exits with an error)."""
STOPPED = -15
"""The exit code of a process stopped with SIGTERM (an agent or driver stopping its
workers): a stop, not a failure. Traces number signals the Linux way whatever machine
reads them (``elastic_sim.protocols.api.SIGNAL_NUMBERS``). Judged by the code, which every
mode records alike; the reason is worded per mode ("killed by SIGTERM" in the sim, "signal
TERM" in real mode, "signal 15" in torchrun's converted traces)."""


def members(ev: TraceEvent) -> list[str]:
    """The distinct hosts of a formed world (rdzv_done members, epoch_assigned ranks);
    members that disagree within one round are united (membership_agreement judges that)."""
    raw = ev.get("members") if "members" in ev.data else list(ev.get("ranks") or {})
    return list(dict.fromkeys(host_of(str(m)) for m in raw or []))


def failed(ev: TraceEvent) -> bool:
    """Whether ``ev`` shows its host's workers (or the host itself) failed: a failed
    collective or group, a worker made to fail, exiting with an error or aborting, a
    restart a failure caused, or a process of the host exiting with an error."""
    return ev.kind in FAILED or (ev.kind == "restart" and bool(ev.get("failure"))) or (
        ev.kind == "proc_exit" and ev.get("code") not in (0, None, STOPPED))


@dataclass
class Capacity:
    """Feed events in order with :meth:`see`; ask :meth:`able` at any point."""

    limits: Limits
    cluster: Cluster = field(default_factory=Cluster)
    remaining: dict[str, int] = field(default_factory=dict)
    """Per host whose agent spends its own budget: restarts left, as last recorded."""
    resets: int = 0
    """Job-wide resets so far (epochs a coordinator assigned after the first)."""
    offered: set[str] | None = None
    """Hosts the discovery offers now (None: no discovery yet, every host)."""
    blacklisted: dict[str, float | None] = field(default_factory=dict)
    """Host -> end of its eviction's cooldown (None: for good)."""
    assigned_at: dict[str, float] = field(default_factory=dict)
    """Host -> when a coordinator last assigned it a place in an epoch."""
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    """(time, host) of every host's first process starting, the whole run's (a host that
    starts later is capacity before it starts, within a waiting host's join deadline)."""
    world_of: dict[str, object] = field(default_factory=dict)
    """Host -> the world it is a member of now (its kind and round)."""
    broken: set[object] = field(default_factory=set)
    """Worlds something failed in since they formed: each member needs a restart."""
    offer_changed: bool = False
    """Whether what the discovery offers changed since the current world formed (a
    coordinator that resets on every membership change must reset for it)."""

    def see(self, ev: TraceEvent) -> None:
        """Take one event into account."""
        self.cluster.see(ev)
        if ev.kind in WORLD:
            world = (ev.kind, ev.get("round"))
            if world not in self.broken and world not in self.world_of.values():
                self.offer_changed = False  # a world formed: it took the offer as it was
            for host in members(ev):
                self.world_of[host] = world
        elif failed(ev) and ev.host in self.world_of:
            self.broken.add(self.world_of[ev.host])
        if ev.proc != f"{ev.host}/main":
            return
        if ev.kind == "proc_start" and self.limits.restart_budget is not None:
            self.remaining[ev.host] = self.limits.restart_budget  # a new incarnation
        elif ev.kind in ("restarts_left", "restart"):
            left = ev.get("left")
            if isinstance(left, int):
                self.remaining[ev.host] = left
        elif ev.kind == "epoch_assigned":
            resets = ev.get("resets")
            if isinstance(resets, int):
                self.resets = max(self.resets, resets)
            for member in ev.get("ranks") or {}:
                self.assigned_at[host_of(str(member))] = ev.t
        elif ev.kind == "offered":
            offered = set(ev.get("hosts", []))
            self.offer_changed = self.offer_changed or offered != self.offered
            self.offered = offered
        elif ev.kind == "evict":
            end = ev.get("until")
            self.blacklisted[str(ev.get("host"))] = (float(end) if isinstance(end, (int, float))
                                                     else None)

    def needs_restart(self, host: str) -> bool:
        """Whether something failed in the host's world since it formed (each of its
        members then needs a restart: a failed member's collectives fail its peers'), or,
        for a budget the job spends, whether the job must reset its world (a failure in
        it, or a change of what the discovery offers)."""
        if self.limits.budget_per_host:
            return self.world_of.get(host) in self.broken
        return bool(self.broken & set(self.world_of.values())) or self.offer_changed

    def budget_left(self, host: str) -> bool:
        """Whether the job could go on with this host as far as its restart budget goes:
        only a failure spends a budget, so a host that needs no restart can go on whatever
        its budget (with torchrun's default ``max_restarts`` 0 a host would otherwise
        never count, and a job that died with every host healthy would pass as
        unavoidable); one that does needs a restart left (its agent's, or the job's: a
        coordinator that counts every reset, a membership change's too, spends it on
        each)."""
        budget = self.limits.restart_budget
        if budget is None or not self.needs_restart(host):
            return True
        if self.limits.budget_per_host:
            return self.remaining.get(host, budget) > 0
        return self.resets < budget

    def _offered(self, host: str, now: float) -> bool:
        if self.offered is not None and host not in self.offered:
            return False
        failure = self.cluster.faulted.get(host)
        if failure is not None and failure.kind == "injected_failure" and (
                self.assigned_at.get(host, -1.0) <= failure.t):
            return False  # its worker was made to fail and it was not taken back since
        if host in self.blacklisted and host in self.cluster.faulted:
            end = self.blacklisted[host]
            return end is not None and end <= now  # a failed host, evicted: not capacity
        return True

    def able(self, now: float) -> list[str]:
        """Hosts the job could continue on now: usable, not told to leave, offered, with
        budget left (none while the coordinator is not usable)."""
        coord = self.cluster.coordinator
        if coord is not None and not self.cluster.usable(coord):
            return []
        return [h for h in self.cluster.usable_hosts() if h not in self.cluster.leaving
                and self._offered(h, now) and self.budget_left(h)]

    def coming(self, now: float) -> list[str]:
        """Hosts not up now whose first process starts after ``now`` and within the join
        deadline (:attr:`Limits.wait_s`): a host waiting for a world would have met them
        (none while the coordinator is not usable)."""
        coord = self.cluster.coordinator
        if coord is not None and not self.cluster.usable(coord):
            return []
        until = now + self.limits.wait_s
        return sorted({h for t, h in self.arrivals if now < t <= until
                       and not self.cluster.is_alive(h) and self._offered(h, now)})

    def enough(self, now: float) -> bool:
        """At least the minimum number of hosts able now or arriving within the join
        deadline, and the coordinator usable."""
        # able() is empty while the store / driver is gone: a single point of failure
        return len(self.able(now)) + len(self.coming(now)) >= self.limits.min_hosts


def replay(events: Sequence[TraceEvent], extra: Iterable[tuple[Key, TraceEvent]] = ()
           ) -> Iterator[tuple[TraceEvent, Capacity]]:
    """Every recorded event in the checks' vocabulary but the ``coll_enter`` /
    ``coll_done`` / ``step`` events of training summaries (the capacity reads none of them;
    ``extra``: keyed ones to put in their place), with the capacity as it stands once the
    event is taken into account; nothing when the run's knobs are of no known protocol."""
    hist = neutral(events)
    limits = run_limits(hist)
    if limits is None:
        return
    cap = Capacity(limits, arrivals=[(ev.t, ev.host) for ev in hist.of("proc_start")
                                     if ev.proc == f"{ev.host}/main"])
    for ev in merged(hist, extra):
        cap.see(ev)
        yield ev, cap


def job_failure(events: Sequence[TraceEvent]) -> TraceEvent | None:
    """The failure a run that ended failed ended with: the first ``job_failed`` of a host
    that was not told to leave (a host signalled, preempted or scaled down fails by
    leaving; the others may go on without it); None when the run did not end failed."""
    hist = neutral(events)
    end = run_end(hist)
    if end is None or end.get("outcome") != "failed":
        return None
    cluster = Cluster()
    for ev in hist.of("run_start", "proc_start", "proc_exit", "fault", "injected_failure",
                      "job_failed"):
        cluster.see(ev)
        if ev.kind == "job_failed" and ev.host not in cluster.leaving:
            return ev
    return None
