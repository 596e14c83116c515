"""Safety checks of configured limits: world sizes within the
protocol's [min, max], restarts within max_restarts, resets within reset_limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent


def _bounds(knobs: Mapping[str, Any]) -> tuple[int, int] | None:
    """(min, max) world size in hosts, for protocols whose rounds count hosts."""
    for lo, hi in (("min_nodes", "max_nodes"), ("min_hosts", "max_hosts")):
        if lo in knobs and hi in knobs and "reset_limit" not in knobs:
            return int(knobs[lo]), int(knobs[hi])
    return None


def limits(events: Sequence[TraceEvent]) -> CheckResult:
    """Configured limits hold: every round's world size within [min, max] (min/max_nodes
    or min/max_hosts), no agent spends more than max_restarts restarts on its workers, and
    a coordinator resets the job (each epoch it assigns after the first) at most
    reset_limit times. The limits are the protocol's knobs, as ``run_start`` records
    them."""
    res = CheckResult("limits", "world sizes within [min, max]; restarts within "
                      "max_restarts; resets within reset_limit", unit="rounds and restarts")
    hist = neutral(events)
    start = hist.first("run_start")
    knobs: Mapping[str, Any] = (start.get("knobs") or {}) if start is not None else {}
    bounds = _bounds(knobs)
    # torchft's replica launcher is torchrun with --max_restarts: its knob is named apart.
    max_restarts = knobs.get("max_restarts", knobs.get("replica_restarts"))
    reset_limit = knobs.get("reset_limit")
    restarts: dict[str, list[TraceEvent]] = {}
    for ev in hist.of("proc_start", "epoch_assigned", "rdzv_done", "restart"):
        if ev.kind == "proc_start":  # an agent started again (its host restarted): a new
            restarts.pop(ev.proc, None)  # agent with its own budget
            continue
        if ev.kind == "epoch_assigned" and isinstance(reset_limit, int):
            res.checked += 1
            resets = ev.get("resets")
            if isinstance(resets, int) and resets > reset_limit:
                res.violations.append(Violation(
                    f"rendezvous {ev.get('round')} is reset {resets}, beyond reset_limit "
                    f"{reset_limit}", [ev]))
            continue
        if ev.kind == "rdzv_done" and bounds is not None:
            res.checked += 1
            size = ev.get("world_size")
            if isinstance(size, int) and not bounds[0] <= size <= bounds[1]:
                res.violations.append(Violation(
                    f"round {ev.get('round')}: world size {size} outside "
                    f"[{bounds[0]}, {bounds[1]}]", [ev]))
        elif ev.kind == "restart" and ev.get("spent"):
            res.checked += 1
            mine = restarts.setdefault(ev.proc, [])
            mine.append(ev)
            left = ev.get("left")
            if (isinstance(left, int) and left < 0) or (
                    isinstance(max_restarts, int) and len(mine) > max_restarts):
                res.violations.append(Violation(
                    f"{ev.proc} restarted its workers {len(mine)} times, max_restarts is "
                    f"{max_restarts}", mine[-2:] if len(mine) > 1 else mine))
    return res
