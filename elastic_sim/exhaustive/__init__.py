"""Exhaustive small worlds (``elastic-sim explore --exhaustive``): for 2-4 nodes, every
ordering of the decision points that matter and every single fault at each point, up to a
bound, over the protocol's pure decision functions (torchelastic's rendezvous ops,
:mod:`elastic_sim.exhaustive.torchelastic`; Horovod's driver decisions,
:mod:`elastic_sim.exhaustive.horovod`), each reached state checked for the broken
promises the checks look for. Every violating path is then replayed through the full
simulation (:mod:`elastic_sim.exhaustive.replay`) and reported like any finding.

A world is plain data: its states are hashable, a move is a label, and the enumeration is
a breadth-first walk with states seen once, so the first path found to a violation is a
shortest one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

S = TypeVar("S", bound=Hashable)

MAX_STATES = 200_000
"""States one enumeration visits at most (it says when it stopped there)."""


@dataclass(frozen=True)
class Move:
    """One decision point taken: who acts and what (``fault``: a fault injected there)."""

    label: str
    actor: str = ""
    fault: bool = False


@dataclass(frozen=True)
class Broken:
    """A promise a move broke: the check that would see it and what happened."""

    check: str
    why: str


class World(Protocol[S]):
    """A small world over a protocol's pure decision functions."""

    def initial(self) -> S:
        """The state before anything happened."""
        ...

    def moves(self, s: S) -> Sequence[Move]:
        """Every move possible from ``s`` (faults included, while the bound allows)."""
        ...

    def after(self, s: S, move: Move) -> tuple[S, list[Broken]]:
        """The state ``move`` leads to, and the promises it broke."""
        ...

    def at_rest(self, s: S) -> list[Broken]:
        """Promises broken by a state nothing can change any more (a stall)."""
        ...


@dataclass(frozen=True)
class Path:
    """A violating path: its moves, in order, and what the last one broke."""

    moves: tuple[Move, ...]
    broken: Broken

    @property
    def faults(self) -> tuple[Move, ...]:
        """The faults it injected."""
        return tuple(m for m in self.moves if m.fault)

    def key(self) -> tuple[str, tuple[str, ...]]:
        """What tells violating paths apart: the check, and each fault (kind and
        target)."""
        return self.broken.check, tuple(m.label for m in self.faults)

    def describe(self) -> str:
        """The path as text."""
        return " > ".join(m.label for m in self.moves)


@dataclass
class Enumeration(Generic[S]):
    """What an enumeration did: states and transitions seen, the violating paths (the
    shortest of each kind), whether it stopped at :data:`MAX_STATES`, its time."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    truncated: bool = False
    seconds: float = 0.0
    paths: list[Path] = field(default_factory=list)


def enumerate_world(world: World[S], depth: int, max_states: int = MAX_STATES) -> Enumeration[S]:
    """Walk every path of ``world`` up to ``depth`` moves, breadth first; each state once."""
    t0 = time.perf_counter()
    out: Enumeration[S] = Enumeration()
    start = world.initial()
    seen: dict[S, None] = {start: None}
    queue: deque[tuple[S, tuple[Move, ...]]] = deque([(start, ())])
    kinds: set[tuple[str, tuple[str, ...]]] = set()

    def report(path: tuple[Move, ...], broken: list[Broken]) -> None:
        for b in broken:
            p = Path(path, b)
            if p.key() not in kinds:
                kinds.add(p.key())
                out.paths.append(p)

    while queue:
        s, path = queue.popleft()
        out.depth = max(out.depth, len(path))
        moved = False
        for move in world.moves(s):
            nxt, broken = world.after(s, move)
            out.transitions += 1
            if nxt == s:
                continue
            moved = True
            report((*path, move), broken)
            if nxt in seen or len(path) + 1 > depth:
                continue
            if len(seen) >= max_states:
                out.truncated = True
                continue
            seen[nxt] = None
            queue.append((nxt, (*path, move)))
        if not moved:
            report(path, world.at_rest(s))
    out.states = len(seen)
    out.seconds = time.perf_counter() - t0
    return out


__all__ = ["MAX_STATES", "Broken", "Enumeration", "Move", "Path", "World", "enumerate_world"]
