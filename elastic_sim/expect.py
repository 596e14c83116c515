"""Expectations: what the user said should happen, held against what did."""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sim.scenario import ExpectModel
from reports.metrics import Metrics


@dataclass
class ExpectationResult:
    """One expectation and whether it held."""

    name: str
    expected: str
    actual: str
    ok: bool


def evaluate(expect: ExpectModel, m: Metrics) -> list[ExpectationResult]:
    """Every expectation the scenario states."""
    out = []
    if expect.outcome is not None:
        out.append(ExpectationResult("outcome", expect.outcome, m.outcome,
                                     m.outcome == expect.outcome))
    if expect.final_world_size is not None:
        out.append(ExpectationResult("final_world_size", str(expect.final_world_size),
                                     str(m.final_world_size),
                                     m.final_world_size == expect.final_world_size))
    if expect.world_sizes is not None:
        out.append(ExpectationResult("world_sizes", _arrow(expect.world_sizes),
                                     _arrow(m.world_sizes), m.world_sizes == expect.world_sizes))
    if expect.max_recovery_s is not None:
        worst = m.max_recovery_s
        unrecovered = [r.id for r in m.recoveries if r.detected_at is not None
                       and r.recovery_s is None]
        ok = not unrecovered and (worst is None or worst <= expect.max_recovery_s)
        actual = "not recovered: " + ", ".join(unrecovered) if unrecovered else (
            "no disruption" if worst is None else f"{worst:.3f} s")
        out.append(ExpectationResult("max_recovery_s", f"<= {expect.max_recovery_s} s", actual,
                                     ok))
    if expect.max_lost_steps is not None:
        out.append(ExpectationResult("max_lost_steps", f"<= {expect.max_lost_steps}",
                                     str(m.lost_steps), m.lost_steps <= expect.max_lost_steps))
    return out


def _arrow(sizes: list[int]) -> str:
    return " -> ".join(str(s) for s in sizes) or "(none)"
