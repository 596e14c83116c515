"""The training state and its arithmetic: pure functions, no runtime.

Parameters start from a per-host initialisation (as random model init differs per
process), so only a state sync makes members agree. Gradients are small integers, so
allreduce sums are exact in any order and every member computes identical floats.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from dataclasses import dataclass

LEARNING_RATE = 1 / 16


@dataclass(frozen=True)
class TrainState:
    """What a member holds: the number of steps done and the parameters."""

    step: int
    params: tuple[float, ...]

    def digest(self) -> str:
        """A short fingerprint that two members compare."""
        return hashlib.sha256(self.header()).hexdigest()[:16]

    def header(self) -> bytes:
        """The state's meaningful bytes: step then parameters."""
        return struct.pack(f"<q{len(self.params)}d", self.step, *self.params)

    def to_bytes(self, size: int) -> bytes:
        """The model blob that a sync broadcasts: the header padded to ``size`` bytes."""
        head = self.header()
        return head + bytes(max(0, size - len(head)))

    @staticmethod
    def from_bytes(blob: bytes | bytearray | memoryview, nparams: int) -> TrainState:
        """Inverse of :meth:`to_bytes`."""
        step, *params = struct.unpack_from(f"<q{nparams}d", blob)
        return TrainState(step, tuple(params))


def initial_state(host: str, seed: int, nparams: int) -> TrainState:
    """A per-host initialisation derived from (seed, host) without any random module."""
    out = []
    for i in range(nparams):
        h = hashlib.sha256(f"{seed}/{host}/{i}".encode()).digest()
        out.append(int.from_bytes(h[:2], "little") / 65536.0)
    return TrainState(0, tuple(out))


def gradients(step: int, rank: int, nparams: int) -> list[float]:
    """This rank's gradient at ``step``: small integers, exact under any summation order.
    Parameter i's is ``(7 step + 3 rank + i) mod 5 - 2``: it depends on ``(7 step + 3 rank)
    mod 5`` alone, so the five rows per size are made once (a simulation computes one per
    member per step)."""
    return list(_gradient_row((step * 7 + rank * 3) % 5, nparams))


@functools.lru_cache(maxsize=64)
def _gradient_row(phase: int, nparams: int) -> tuple[float, ...]:
    return tuple(float((phase + i) % 5 - 2) for i in range(nparams))


def apply_step(state: TrainState, summed: list[float], world_size: int) -> TrainState:
    """One optimiser step with the allreduced gradient sum. Every member of a group takes
    the same step from the same state (that is what the sync is for), so a simulation asks
    for each step once per member: the last few steps are remembered (a pure function:
    the same floats, computed once). The memo compares floats by value, which would merge
    a -0.0 with a 0.0; neither a state nor a sum here holds -0.0 (sums of integers start
    from +0.0, and ``x - x`` is +0.0), so no two different steps share a key."""
    return _step(state, tuple(summed), world_size)


@functools.lru_cache(maxsize=4096)
def _step(state: TrainState, summed: tuple[float, ...], world_size: int) -> TrainState:
    params = tuple(
        p - LEARNING_RATE * g / world_size for p, g in zip(state.params, summed, strict=True)
    )
    return TrainState(state.step + 1, params)


def choose_root(committed_steps: list[float]) -> int:
    """The rank whose state everyone adopts: the most committed progress, lowest rank on ties."""
    best = max(committed_steps)
    return committed_steps.index(best)
