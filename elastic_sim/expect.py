"""Expectations: what the user said should happen, held against what did."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from elastic_sim.checks.verdict import CheckResult
from elastic_sim.history import history
from elastic_sim.reports.metrics import Metrics
from elastic_sim.scenario import ExpectModel
from elastic_sim.trace import TraceEvent


@dataclass
class ExpectationResult:
    """One expectation and whether it held."""

    name: str
    expected: str
    actual: str
    ok: bool


def evaluate(
    expect: ExpectModel, m: Metrics, events: Sequence[TraceEvent] = (),
    not_judged: Collection[str] = (), checks: Sequence[CheckResult] | None = None,
) -> list[ExpectationResult]:
    """Every expectation the scenario states (``events``: the run's trace;
    ``not_judged``: checks the run's events cannot judge, left out of ``violated_checks``
    on both sides; ``checks``: the run's check results, when already run)."""
    out = []
    if expect.outcome is not None:
        out.append(ExpectationResult("outcome", expect.outcome, m.outcome,
                                     m.outcome == expect.outcome))
    if expect.final_world_size is not None:
        out.append(ExpectationResult("final_world_size", str(expect.final_world_size),
                                     str(m.final_world_size),
                                     m.final_world_size == expect.final_world_size))
    if expect.final_world_size_between is not None:
        low, high = expect.final_world_size_between
        out.append(ExpectationResult("final_world_size_between", f"{low}..{high}",
                                     str(m.final_world_size),
                                     low <= m.final_world_size <= high))
    if expect.world_sizes is not None:
        out.append(ExpectationResult("world_sizes", _arrow(expect.world_sizes),
                                     _arrow(m.world_sizes), m.world_sizes == expect.world_sizes))
    if expect.max_recovery_s is not None:
        out.append(_max_recovery(expect.max_recovery_s, m))
    if expect.max_lost_steps is not None:
        out.append(ExpectationResult("max_lost_steps", f"<= {expect.max_lost_steps}",
                                     str(m.lost_steps), m.lost_steps <= expect.max_lost_steps))
    if expect.epoch_logs is not None:
        out.append(_epoch_logs([w.model_dump(exclude_none=True) for w in expect.epoch_logs],
                               events))
    if expect.error_contains is not None:
        hit = [e for e in m.errors if expect.error_contains in e]
        out.append(ExpectationResult("error_contains", repr(expect.error_contains),
                                     "; ".join(m.errors) or "(no error)", bool(hit)))
    if expect.max_end_s is not None:
        hung = m.outcome == "hung"
        out.append(ExpectationResult("max_end_s", f"<= {expect.max_end_s} s",
                                     "hung" if hung else f"{m.end_time:.3f} s",
                                     not hung and m.end_time <= expect.max_end_s))
    if expect.violated_checks is not None:
        from elastic_sim.checks import run_checks

        maybe = set(expect.may_violate or ())
        failed = sorted(c.name for c in (run_checks(events) if checks is None else checks)
                        if not c.ok and c.name not in not_judged and c.name not in maybe)
        wanted = sorted(c for c in expect.violated_checks
                        if c not in not_judged and c not in maybe)
        out.append(ExpectationResult("violated_checks", ", ".join(wanted) or "(none)",
                                     ", ".join(failed) or "(none)", failed == wanted))
    return out


def _max_recovery(bound: float, m: Metrics) -> ExpectationResult:
    """Every fault that needed a recovery (a survivor saw it) recovered within ``bound``;
    the actual value lists each such fault's figure."""
    needed = [r for r in m.recoveries if r.needed_recovery]
    figures = [f"{r.id} " + ("not recovered" if r.recovery_s is None else f"{r.recovery_s:.3f} s")
               for r in needed]
    ok = all(r.recovery_s is not None and r.recovery_s <= bound for r in needed)
    return ExpectationResult("max_recovery_s", f"<= {bound} s per fault",
                             "; ".join(figures) or "no fault needed a recovery", ok)


def _epoch_logs(
    wanted: list[dict[str, int | str]], events: Sequence[TraceEvent]
) -> ExpectationResult:
    """The epoch log lines: their count, and the named fields of each."""
    logs = history(events).of("epoch_log")
    keys = sorted({k for w in wanted for k in w})
    actual = [{k: e.get(k) for k in keys} for e in logs]
    ok = len(logs) == len(wanted) and all(
        all(got.get(k) == v for k, v in w.items())
        for w, got in zip(wanted, actual, strict=False))
    return ExpectationResult("epoch_logs", str(wanted), str(actual), ok)


def _arrow(sizes: list[int]) -> str:
    return " -> ".join(str(s) for s in sizes) or "(none)"
