"""Torchelastic's rendezvous as a small world: 2-4 agents forming one round over the c10d
dynamic rendezvous's pure decision functions (``protocols/torchelastic/ops.py``: the join
op, keep-alive op, apply; ``state.py``: the sweep of expired heartbeats), in every
interleaving of their steps, with one fault (a crash or a freeze of an agent other than
the store's) at every point.

Each step is what an agent does between two store round trips: sweep the heartbeats its
own clock sees as expired, decide, and write the result by compare-and-set (atomic here: a
lost race is the other order). Time moves in ticks of one keep-alive interval; the last
call lasts one tick and a heartbeat expires after two. Scheduling is fair: the clock
ticks only once every live agent took a step since the last tick (a live agent polls and
beats every interval; only a fault stops one).

Promises checked as each state is reached: a round completes with live members
(``members_alive_at_completion``), within ``min_nodes..max_nodes`` (``limits``), and every
member learns the same membership (``membership_agreement``) and its place in it
(``rank_validity``); a world where nothing more can happen has completed a round whose
last call is long over with ``min_nodes`` live participants (``eventual_incorporation``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from elastic_sim.exhaustive import Broken, Move
from elastic_sim.protocols.torchelastic.ops import (
    MUTATIONS,
    Action,
    Context,
    RendezvousGracefulExitError,
    apply,
    join_op,
    keep_alive_op,
)
from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
    expired_nodes,
    sweep,
)

TICKS = 5
"""Keep-alive intervals the world's clock may run to."""
US = 1_000_000
JOIN = 1000.0
"""The join deadline (monotonic seconds): beyond the world's clock."""
LIVE = ("joining", "done")
"""Phases of an agent that steps every interval."""


@dataclass(frozen=True)
class RdzvState:
    """The store's bytes and every agent's place: ``idle`` (not started), ``joining``,
    ``done`` (with the membership and rank it learned), ``failed``, ``dead``, ``frozen``."""

    store: bytes
    phase: tuple[str, ...]
    views: tuple[tuple[str, ...] | None, ...]
    ranks: tuple[int | None, ...]
    acted: tuple[bool, ...]
    """Which agents took a step since the last tick."""
    t: int = 0
    faults: int = 0


class RendezvousWorld:
    """One round of the c10d dynamic rendezvous among ``hosts`` (the store on ``store``)."""

    def __init__(self, hosts: Sequence[str], min_nodes: int, max_nodes: int, store: str,
                 max_faults: int = 1) -> None:
        self.hosts = tuple(hosts)
        self.nodes = tuple(NodeDesc(h, 1, 0) for h in self.hosts)
        self.store = store
        self.max_faults = max_faults
        self.settings = RendezvousSettings(
            min_nodes=min_nodes, max_nodes=max_nodes, join_timeout=JOIN,
            last_call_timeout=1.0, heartbeat_timeout=1.0, keep_alive_interval=1.0,
            keep_alive_max_attempt=2)

    def initial(self) -> RdzvState:
        n = len(self.hosts)
        return RdzvState(RendezvousState().encode(), ("idle",) * n, (None,) * n, (None,) * n,
                         (False,) * n)

    def moves(self, s: RdzvState) -> list[Move]:
        out = []
        for i, h in enumerate(self.hosts):
            ph = s.phase[i]
            if ph == "idle":
                out.append(Move(f"start {h}", h))
            elif ph == "joining":
                out.append(Move(f"step {h}", h))
            elif ph == "done":
                out.append(Move(f"beat {h}", h))
            elif ph == "frozen":
                out.append(Move(f"thaw {h}", h))
            if s.faults < self.max_faults and h != self.store and ph not in ("dead", "frozen"):
                out.append(Move(f"crash {h}", h, fault=True))
                out.append(Move(f"freeze {h}", h, fault=True))
        if s.t < TICKS and all(a or ph not in LIVE for a, ph in zip(s.acted, s.phase,
                                                                      strict=True)):
            out.append(Move("tick"))
        return out

    def after(self, s: RdzvState, move: Move) -> tuple[RdzvState, list[Broken]]:
        verb = move.label.split(" ")[0]
        if verb == "tick":
            return replace(s, t=s.t + 1, acted=(False,) * len(self.hosts)), []
        i = self.hosts.index(move.actor)
        s = replace(s, acted=(*s.acted[:i], True, *s.acted[i + 1:]))
        if verb == "start":
            return self._phase(s, i, "joining"), []
        if verb in ("crash", "freeze"):
            s = self._phase(s, i, "dead" if verb == "crash" else "frozen")
            return replace(s, faults=s.faults + 1), []
        if verb == "thaw":
            back = "done" if s.views[i] is not None else "joining"
            return self._phase(s, i, back), []
        return self._step(s, i, verb == "beat")

    def _phase(self, s: RdzvState, i: int, phase: str) -> RdzvState:
        return replace(s, phase=(*s.phase[:i], phase, *s.phase[i + 1:]))

    def _step(self, s: RdzvState, i: int, beat: bool) -> tuple[RdzvState, list[Broken]]:
        """Agent ``i``'s next store round trip: its join op (or, once done, its keep-alive)
        on the state its own sweep leaves."""
        node, now = self.nodes[i], s.t * US
        local = RendezvousState.decode(s.store)
        was_complete = local.complete
        sweep(local, expired_nodes(local, self.settings, now), self.settings)
        ctx = Context(node, local, self.settings, float(s.t), now)
        try:
            action = keep_alive_op(ctx, JOIN) if beat else join_op(ctx, JOIN)
        except RendezvousGracefulExitError:
            return self._phase(s, i, "failed"), []
        broken: list[Broken] = []
        if action in MUTATIONS:
            apply(action, local, node, self.settings, now)
            if local.complete and not was_complete:
                broken += self._completed(s, local)
            s = replace(s, store=local.encode())
        elif action is Action.FINISH and not beat:
            view = tuple(n.addr for n in sorted(local.participants))
            s = replace(self._phase(s, i, "done"), views=(*s.views[:i], view, *s.views[i + 1:]),
                        ranks=(*s.ranks[:i], local.participants[node], *s.ranks[i + 1:]))
            broken += self._learned(s, i)
        elif action in (Action.ERROR_CLOSED, Action.ERROR_TIMEOUT):
            s = self._phase(s, i, "failed")
        return s, broken

    def _completed(self, s: RdzvState, local: RendezvousState) -> list[Broken]:
        out = []
        dead = [n.addr for n in local.participants
                if s.phase[self.hosts.index(n.addr)] == "dead"]
        if dead:
            out.append(Broken("members_alive_at_completion",
                              f"the round completed with {', '.join(dead)}, dead, in it"))
        size = len(local.participants)
        if not self.settings.min_nodes <= size <= self.settings.max_nodes:
            out.append(Broken("limits", f"the round completed with {size} members"))
        return out

    def _learned(self, s: RdzvState, i: int) -> list[Broken]:
        out = []
        view, rank = s.views[i], s.ranks[i]
        assert view is not None
        for j, other in enumerate(s.views):
            if j != i and other is not None and other != view:
                out.append(Broken("membership_agreement",
                                  f"{self.hosts[i]} learned {list(view)}, "
                                  f"{self.hosts[j]} {list(other)}"))
                break
        if self.hosts[i] not in view or view.index(self.hosts[i]) != rank:
            out.append(Broken("rank_validity", f"{self.hosts[i]} got rank {rank} in "
                              f"{list(view)}"))
        return out

    def at_rest(self, s: RdzvState) -> list[Broken]:
        state = RendezvousState.decode(s.store)
        live = [n.addr for n in state.participants
                if s.phase[self.hosts.index(n.addr)] in LIVE]
        overdue = state.deadline is not None and state.deadline + 2 * US <= s.t * US
        if not state.complete and overdue and len(live) >= self.settings.min_nodes:
            return [Broken("eventual_incorporation", f"{len(live)} live participants, the "
                           "last call long over, and no round formed")]
        return []


__all__ = ["TICKS", "RdzvState", "RendezvousWorld"]
