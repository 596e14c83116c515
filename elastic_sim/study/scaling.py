"""From samples at a ladder of sizes to the job's size: each recovery phase's growth with
the number of nodes, fitted as a power law over the sampled sizes, carries the samples of
the largest size to the job's. Capacity (a host's downtime) does not scale; neither does
whether the job survived a failure (the largest size's samples say it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from elastic_sim.study.samples import Measured

PHASES = ("detect", "rendezvous", "restart", "died_after", "start_s")
"""The figures of a sample that scale with the job's size."""
MAX_EXPONENT = 3.0


@dataclass(frozen=True)
class Growth:
    """How one phase of one kind of recovery grew over the sampled sizes."""

    phase: str
    sizes: tuple[int, ...]
    medians: tuple[float, ...]
    exponent: float
    """``k`` in phase ~ nodes^k (0: flat, or too few sizes to tell)."""

    def factor(self, nodes: int) -> float:
        """What the largest sampled size's figure is multiplied by at ``nodes``."""
        return (nodes / self.sizes[-1]) ** self.exponent if self.sizes else 1.0


def ladder(nodes: int, max_nodes: int, sizes: Sequence[int] | None) -> list[int]:
    """The sizes to sample a job of ``nodes`` at: its own when it is at most
    ``max_nodes``, else the given ladder (default: max_nodes / 4, / 2, max_nodes)."""
    if nodes <= max_nodes:
        return [nodes]
    if sizes:
        return [s for s in sizes if s <= nodes] or [min(sizes)]
    return sorted({max(2, max_nodes // 4), max(2, max_nodes // 2), max_nodes})


def fit(phase: str, by_size: dict[int, list[Measured]]) -> Growth:
    """The power law of ``phase`` through its median at each size (least squares in
    log-log; sizes where the phase is absent or zero are left out)."""
    pts = []
    for n in sorted(by_size):
        vals = [v for m in by_size[n] if (v := getattr(m, phase)) is not None]
        if vals and statistics.median(vals) > 0:
            pts.append((n, statistics.median(vals)))
    sizes = tuple(sorted(by_size))
    if len(pts) < 2:
        return Growth(phase, sizes, tuple(p[1] for p in pts), 0.0)
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(v) for _, v in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0
    return Growth(phase, tuple(n for n, _ in pts), tuple(v for _, v in pts),
                  min(max(k, 0.0), MAX_EXPONENT))


def scale(by_size: dict[int, list[Measured]], nodes: int) -> tuple[list[Measured],
                                                                   list[Growth]]:
    """The samples at ``nodes``: the largest size's, each phase multiplied by its growth
    factor (samples at ``nodes`` itself are returned as they are)."""
    if nodes in by_size:
        return list(by_size[nodes]), []
    growths = [fit(p, by_size) for p in PHASES]
    top = by_size[max(by_size)]
    out = []
    for m in top:
        changes = {g.phase: getattr(m, g.phase) * g.factor(nodes) for g in growths
                   if getattr(m, g.phase) is not None}
        out.append(replace(m, nodes=nodes, **changes))
    return out, growths
