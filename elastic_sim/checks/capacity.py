"""The job's capacity to go on, as the trace shows it at any instant: which hosts are
usable (alive, not frozen, reachable from the coordinator), still offered to the job (not
dropped by discovery, not evicted after failing) and have restart budget left."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from elastic_sim.checks.facts import Cluster, Limits, host_of, run_limits
from elastic_sim.history import Key, merged, neutral
from elastic_sim.trace import TraceEvent


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
    """Hosts the discovery offers now (None: no discovery, every host)."""
    blacklisted: dict[str, float | None] = field(default_factory=dict)
    """Host -> end of its eviction's cooldown (None: for good)."""
    assigned_at: dict[str, float] = field(default_factory=dict)
    """Host -> when a coordinator last assigned it a place in an epoch."""

    def see(self, ev: TraceEvent) -> None:
        """Take one event into account."""
        self.cluster.see(ev)
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
            self.offered = set(ev.get("hosts", []))
        elif ev.kind == "evict":
            end = ev.get("until")
            self.blacklisted[str(ev.get("host"))] = (float(end) if isinstance(end, (int, float))
                                                     else None)

    @property
    def struck(self) -> bool:
        """Whether a fault has struck any host yet (before, no failure needs a restart)."""
        return bool(self.cluster.faulted)

    def budget_left(self, host: str) -> bool:
        """Whether the job could absorb one more failure on this host. Before any fault
        there is no failure to absorb: every host can go on whatever its budget (with
        torchrun's default ``max_restarts`` 0 a host would otherwise never count, and a
        fault-free job that died with every host healthy would pass as unavoidable)."""
        budget = self.limits.restart_budget
        if budget is None or not self.struck:
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
        """Hosts the job could continue on now: usable, offered, with budget left (none
        while the coordinator is not usable)."""
        coord = self.cluster.coordinator
        if coord is not None and not self.cluster.usable(coord):
            return []
        return [h for h in self.cluster.usable_hosts()
                if self._offered(h, now) and self.budget_left(h)]

    def enough(self, now: float) -> bool:
        """At least the minimum number of able hosts, and the coordinator usable."""
        # able() is empty while the store / driver is gone: a single point of failure
        return len(self.able(now)) >= self.limits.min_hosts


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
    cap = Capacity(limits)
    for ev in merged(hist, extra):
        cap.see(ev)
        yield ev, cap
