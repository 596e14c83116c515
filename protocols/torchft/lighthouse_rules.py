"""The Lighthouse's decisions as pure functions (src/lighthouse.rs ``quorum_compute`` and
the quorum tick), and :class:`LighthouseCore`, its state and the quorum requests waiting
on it, without any I/O: the Lighthouse process (:mod:`.lighthouse`) feeds it requests,
heartbeats and ticks and sends what it answers; the differential tests drive it on the
same schedule as a real ``LighthouseServer``.

What upstream decides, in order (each quorum request is also a heartbeat, and runs a tick
at once):

1. healthy replicas: those whose last heartbeat is younger than ``heartbeat_timeout``;
   healthy participants: the quorum requests of healthy replicas;
2. with a previous quorum: if any healthy participant asks to shrink only, only previous
   members stay candidates; a *fast* quorum is issued at once when every previous member
   is a healthy participant again (newcomers included unless shrinking, and without
   looking at ``min_replicas``);
3. otherwise a quorum needs ``min_replicas`` healthy participants and more than half of
   the healthy replicas (split brain), and, unless every healthy replica asked, waits
   ``join_timeout`` from the first participant's request for stragglers;
4. an issued quorum gets the next id if its member ids differ from the previous quorum's,
   or if any member reports should_commit failures; the same id otherwise. The requests
   are then cleared: a waiting requester left out of it asks again (its request time is
   now), and is answered by the first quorum that includes it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

from elastic_sim.protocols.torchft.quorum import Quorum, QuorumMember

Kind = Literal["fast", "valid"]
Bump = Literal["membership", "commit_failures"]


@dataclass(frozen=True)
class LighthouseSettings:
    """The Lighthouse's options (src/lighthouse.rs ``LighthouseOpt``), in seconds, and the
    variants broken on purpose (:class:`~.knobs.TorchFTKnobs`)."""

    min_replicas: int = 1
    join_timeout: float = 60.0
    quorum_tick: float = 0.1
    heartbeat_timeout: float = 5.0
    broken: frozenset[str] = frozenset()
    """Names of the broken variants in force (``new_id_always``, ``no_split_brain_rule``,
    ``heartbeats_never_expire``); empty upstream."""


@dataclass(frozen=True)
class Joined:
    """A quorum request: when it was made (or made again) and who made it."""

    joined: float
    member: QuorumMember


@dataclass
class LighthouseState:
    """What the Lighthouse holds between decisions."""

    participants: dict[str, Joined] = field(default_factory=dict)
    """Replica id -> its pending quorum request."""
    heartbeats: dict[str, float] = field(default_factory=dict)
    """Replica id -> its last heartbeat (never forgotten)."""
    prev_quorum: Quorum | None = None
    quorum_id: int = 0


@dataclass(frozen=True)
class Decision:
    """What :func:`quorum_compute` found: the members of a quorum to issue now (None: not
    yet), which rule let it form, and why, with the sets it looked at."""

    members: tuple[QuorumMember, ...] | None
    kind: Kind | None
    reason: str
    healthy_participants: tuple[str, ...]
    healthy_replicas: tuple[str, ...]


def healthy(now: float, state: LighthouseState, settings: LighthouseSettings) -> set[str]:
    """Replicas whose last heartbeat is younger than the heartbeat timeout."""
    if "heartbeats_never_expire" in settings.broken:
        return set(state.heartbeats)
    return {rid for rid, last in state.heartbeats.items()
            if now - last < settings.heartbeat_timeout}


def fast_quorum(prev: Quorum, ready: Collection[str]) -> bool:
    """Whether every member of the previous quorum is a healthy participant again."""
    return all(rid in ready for rid in prev.replica_ids)


def quorum_compute(now: float, state: LighthouseState, settings: LighthouseSettings
                   ) -> Decision:
    """Whether a quorum can be issued now, and with whom (upstream's rules, in its order)."""
    alive = healthy(now, state, settings)
    ready = {rid: j for rid, j in state.participants.items() if rid in alive}
    candidates = sorted((j.member for j in ready.values()), key=lambda m: m.replica_id)
    shrink = any(j.member.shrink_only for j in ready.values())
    sets = (tuple(sorted(ready)), tuple(sorted(alive)))
    meta = (f"[{len(ready)}/{len(state.participants)} participants healthy]"
            f"[{len(alive)} heartbeating][shrink_only={str(shrink).lower()}]")
    prev = state.prev_quorum
    if prev is not None:
        if shrink:
            before = set(prev.replica_ids)
            candidates = [m for m in candidates if m.replica_id in before]
        if fast_quorum(prev, ready):
            return Decision(tuple(candidates), "fast", f"Fast quorum found! {meta}", *sets)
    if len(ready) < settings.min_replicas:
        return Decision(None, None, f"New quorum not ready, only have {len(ready)} "
                        f"participants, need min_replicas {settings.min_replicas} {meta}",
                        *sets)
    if len(ready) <= len(alive) // 2 and "no_split_brain_rule" not in settings.broken:
        return Decision(None, None, f"New quorum not ready, only have {len(ready)} "
                        f"participants, need at least half of {len(alive)} healthy workers "
                        f"{meta}", *sets)
    first = min((j.joined for j in ready.values()), default=now)
    if len(ready) != len(alive) and now - first < settings.join_timeout:
        return Decision(None, None, f"Valid quorum with {len(ready)} participants, waiting "
                        f"for {len(alive) - len(ready)} healthy but not participating "
                        f"stragglers due to join timeout {meta}", *sets)
    return Decision(tuple(candidates), "valid", f"Valid quorum found {meta}", *sets)


def next_quorum_id(state: LighthouseState, members: Iterable[QuorumMember]
                   ) -> tuple[int, Bump | None]:
    """The id a quorum of ``members`` gets, and why it is a new one (None: the same id)."""
    members = list(members)
    prev = state.prev_quorum
    if prev is None or [m.replica_id for m in members] != prev.replica_ids:
        return state.quorum_id + 1, "membership"
    if any(m.commit_failures > 0 for m in members):
        return state.quorum_id + 1, "commit_failures"
    return state.quorum_id, None


@dataclass(frozen=True)
class Tick:
    """One tick's outcome: the decision, and the quorum it issued (None: none)."""

    decision: Decision
    quorum: Quorum | None = None
    bump: Bump | None = None


def quorum_tick(now: float, state: LighthouseState, settings: LighthouseSettings) -> Tick:
    """What one tick decides (``_quorum_tick``), without changing ``state``:
    :func:`apply_tick` does."""
    decision = quorum_compute(now, state, settings)
    if decision.members is None:
        return Tick(decision)
    qid, bump = next_quorum_id(state, decision.members)
    if bump is None and "new_id_always" in settings.broken:
        qid, bump = qid + 1, "membership"
    return Tick(decision, Quorum(qid, decision.members, now), bump)


def apply_tick(state: LighthouseState, tick: Tick) -> None:
    """Issue the tick's quorum, if any: it becomes the previous quorum and every pending
    request is cleared."""
    if tick.quorum is None:
        return
    state.quorum_id = tick.quorum.quorum_id
    state.prev_quorum = tick.quorum
    state.participants.clear()


@dataclass
class Waiter:
    """A quorum request waiting for a quorum that includes its replica."""

    token: object
    member: QuorumMember
    deadline: float
    """When its caller gives up (the request's gRPC deadline)."""


class LighthouseCore:
    """The Lighthouse's state and its waiting requests, driven by calls instead of I/O.
    Each call returns the answers due: ``(waiter token, quorum)`` pairs, and the ticks
    that issued a quorum (for the trace)."""

    def __init__(self, settings: LighthouseSettings) -> None:
        self.settings = settings
        self.state = LighthouseState()
        self.waiters: list[Waiter] = []
        self.issued: list[Tick] = []
        """Ticks that issued a quorum since the caller last emptied it."""

    def heartbeat(self, now: float, replica_id: str) -> None:
        """A heartbeat from ``replica_id``."""
        self.state.heartbeats[replica_id] = now

    def request(self, now: float, member: QuorumMember, token: object, deadline: float
                ) -> list[tuple[object, Quorum]]:
        """A quorum request: an implicit heartbeat, a participant, a waiter, and a tick at
        once (upstream's proactive tick)."""
        self.state.heartbeats[member.replica_id] = now
        self.state.participants[member.replica_id] = Joined(now, member)
        self.waiters.append(Waiter(token, member, deadline))
        return self.tick(now)

    def tick(self, now: float) -> list[tuple[object, Quorum]]:
        """One tick: issue a quorum if one is due, and answer the waiters it includes; a
        waiter it leaves out asks again, from now."""
        tick = quorum_tick(now, self.state, self.settings)
        if tick.quorum is None:
            return []
        apply_tick(self.state, tick)
        self.issued.append(tick)
        ids = set(tick.quorum.replica_ids)
        out: list[tuple[object, Quorum]] = []
        left: list[Waiter] = []
        for w in self.waiters:
            if w.deadline <= now:
                continue  # its caller gave up: the request was cancelled
            if w.member.replica_id in ids:
                out.append((w.token, tick.quorum))
            else:
                self.state.participants[w.member.replica_id] = Joined(now, w.member)
                left.append(w)
        self.waiters = left
        return out

    def pending(self) -> bool:
        """Whether a tick could issue a quorum (some request is pending)."""
        return bool(self.state.participants)
