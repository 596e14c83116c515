"""Checks of how restarts are counted and spent: one restart count per world, no more
failures absorbed than the configured budget, and no reconfiguration that changes
nothing."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.capacity import STOPPED as STOPPED
from elastic_sim.checks.capacity import failed as workers_failed
from elastic_sim.checks.facts import run_limits
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent


def restart_accounting(events: Sequence[TraceEvent]) -> CheckResult:
    """The workers of one world are told one restart count, and the job absorbs no more
    failures than its budget (``max_restarts``): rounds formed after a failure restart are
    counted for the job, so a host that leaves and comes back with a fresh budget cannot
    reset it unseen."""
    res = CheckResult("restart_accounting",
                      "one restart count per world; failures absorbed within the budget",
                      unit="worlds")
    hist = neutral(events)
    limits = run_limits(hist)
    budget = limits.restart_budget if limits is not None and limits.budget_per_host else None
    told: dict[object, TraceEvent] = {}
    pending: dict[str, TraceEvent] = {}
    """Per agent: a failure restart not yet followed by a round."""
    absorbed: dict[object, TraceEvent] = {}
    """Round -> the failure restart that led to it."""
    for ev in hist.plain:  # it reads no summarised kind
        if ev.kind == "restart" and ev.get("failure"):
            pending[ev.proc] = ev
        elif ev.kind == "rdzv_done" and ev.proc in pending:
            cause = pending.pop(ev.proc)
            rnd = ev.get("round")
            if rnd not in absorbed:
                absorbed[rnd] = cause
                if budget is not None and len(absorbed) == budget + 1:
                    first = next(iter(absorbed.values()))
                    res.violations.append(Violation(
                        f"round {rnd} is the job's {len(absorbed)}th restart after a failure, "
                        f"beyond max_restarts {budget} (each agent counts only its own)",
                        [first, cause, ev]))
        elif ev.kind == "restart_count":
            rnd = ev.get("round")
            agreed = told.get(rnd)
            if agreed is None:
                told[rnd] = ev
                res.checked += 1
            elif agreed.get("count") != ev.get("count"):
                res.violations.append(Violation(
                    f"round {rnd}: {agreed.host}'s workers were told restart "
                    f"{agreed.get('count')}, {ev.host}'s restart "
                    f"{ev.get('count')}", [agreed, ev]))
    return res


FAILURES = ("fault", "job_failed")
"""Events that show something failed, besides a host's workers failing
(:func:`~elastic_sim.checks.capacity.failed`)."""


def _world(ev: TraceEvent) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """(members, ranks) of a formed world: rdzv_done (members in rank order) or
    epoch_assigned (rank per member)."""
    if ev.kind == "epoch_assigned":
        ranks = ev.get("ranks") or {}
        return tuple(sorted(ranks)), tuple(sorted((str(k), int(v)) for k, v in ranks.items()))
    members = tuple(str(m) for m in ev.get("members") or [])
    return members, tuple((m, i) for i, m in enumerate(members))


def no_pointless_reconfiguration(events: Sequence[TraceEvent]) -> CheckResult:
    """A new round (or a coordinator's new assignment) that forms the very same world (same
    members, same ranks) follows a failure: a fault, a failed collective, a worker that
    exited with an error or was made to fail, a failure restart. Otherwise it only cost the
    job a restart."""
    res = CheckResult("no_pointless_reconfiguration",
                      "a reconfiguration to the same members and ranks follows a failure",
                      unit="reconfigurations")
    prev: dict[str, TraceEvent] = {}
    """Per kind of world event: the last world formed."""
    failed: dict[str, bool] = {}
    """Per kind: whether something failed since that world formed."""
    seen: set[object] = set()
    # Where a coordinator assigns the world (epoch_assigned), its members' rdzv_done
    # repeat it.
    hist = neutral(events)
    kind = "epoch_assigned" if hist.of("epoch_assigned") else "rdzv_done"
    for ev in hist.plain:  # it reads no summarised kind
        if ev.kind in FAILURES or workers_failed(ev):
            failed = dict.fromkeys(prev, True)
            continue
        if ev.kind != kind:
            continue
        key = (ev.kind, ev.get("round"))
        if key in seen:
            continue
        seen.add(key)
        last = prev.get(ev.kind)
        if last is not None:
            res.checked += 1
            if _world(last) == _world(ev) and not failed.get(ev.kind):
                res.violations.append(Violation(
                    f"the world formed again at {ev.t:g} s with the same members and ranks "
                    f"as at {last.t:g} s, and nothing failed in between", [last, ev]))
        prev[ev.kind], failed[ev.kind] = ev, False
    return res
