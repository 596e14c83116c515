"""Stalls of negotiated groups (:class:`~elastic_sim.protocols.api.Negotiation`, Horovod's
controller): a collective that members submitted under different names, or that some
member has not submitted yet, waits instead of timing out, as long as every member runs
and can be reached (its controller keeps negotiating); the group timeout applies only to
a member that cannot take part. Rank 0's stall inspector looks at the first controller
cycle past every ``stall_check_s`` seconds from the group's formation, traces
``coll_stall`` for the collectives waited on for longer than that, and, with a shutdown
time, shuts the group down.

These are the methods of :class:`CollectiveStalls`, a mixin of
:class:`~elastic_sim.sim.collectives.CollectiveEngine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elastic_sim.sim.collective_state import (
    BLOCKED,
    DONE,
    SCHEDULED,
    Entry,
    GroupState,
    Member,
)

if TYPE_CHECKING:
    from elastic_sim.sim.kernel import Kernel
    from elastic_sim.sim.network import Network

SHUT_DOWN = "Horovod has been shut down: ranks stalled past the stall shutdown time"
"""Why the calls of a group the stall inspector shut down fail."""


class CollectiveStalls:
    """Mixin of :class:`~elastic_sim.sim.collectives.CollectiveEngine`: what negotiated groups
    do about collectives that do not match (what the engine provides is declared for the
    type checker only)."""

    if TYPE_CHECKING:
        k: Kernel
        net: Network

        def abort(self, m: Member, why: str = "aborted") -> None: ...

    def _stalled(self, e: Entry) -> bool:
        """Whether ``e``'s deadline passes without effect: a negotiated group's collective
        (not its creation) that waits on a stall, every member running and reachable."""
        g = e.member.group
        op = e.op
        if g.negotiation is None or op is None or op.seq < 0 or op.hung:
            return False
        hosts = []
        for x in g.members:
            if x is None or x.dead or not x.proc.alive or not x.proc.runnable:
                return False
            hosts.append(x.proc.host.name)
        return self.net.all_reachable(hosts)

    def _formed(self, g: GroupState) -> None:
        """A group was created: its stall inspector starts (a negotiated group's)."""
        neg = g.negotiation
        if neg is not None and neg.stall_check:
            self.k.call_later(neg.stall_check_s + neg.cycle_s, self._stall_check, g)

    def _stall_check(self, g: GroupState) -> None:
        """One look of the stall inspector (StallInspector::CheckForStalledTensors)."""
        neg = g.negotiation
        assert neg is not None
        live = [m for m in g.members if m is not None and not m.dead]
        if not live:
            return  # every member left: the controller is gone
        now = self.k.now
        submitted: dict[str, list[int]] = {}
        waited = 0.0
        for op in g.ops.values():
            if op.state in (DONE, SCHEDULED, BLOCKED) or op.hung:
                continue  # done, running, or a transport wait (the group timeout's)
            entries = [e for e in op.entries.values() if not e.done]
            lag = now - min((e.t for e in entries), default=now)
            if lag <= neg.stall_check_s:
                continue
            waited = max(waited, lag)
            for e in sorted(entries, key=lambda x: x.member.rank):
                submitted.setdefault(e.name or e.kind, []).append(e.member.rank)
        if submitted:
            ranks = [m.rank for m in live]
            missing = {str(r): [n for n in sorted(submitted) if r not in submitted[n]]
                       for r in ranks}
            shut = (neg.stall_check_s <= neg.stall_shutdown_s < waited
                    and neg.stall_shutdown_s > 0)
            coordinator = g.members[0]
            if coordinator is not None and coordinator.proc.alive:
                p = coordinator.proc
                self.k.trace(p.host.name, p.name, "coll_stall", {
                    "group": g.name, "submitted": {n: submitted[n] for n in sorted(submitted)},
                    "missing": {r: ns for r, ns in missing.items() if ns},
                    "waited_s": round(waited, 6), "shutdown": shut})
            if shut:
                for m in live:
                    self.abort(m, SHUT_DOWN)
                return
        self.k.call_later(neg.stall_check_s + neg.cycle_s, self._stall_check, g)
