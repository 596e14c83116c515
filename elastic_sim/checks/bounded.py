"""Checks of a run that was ended before its end: virtual time stopped advancing (a
livelock of the protocol), or a guard of the tool (wall clock, memory) ran out. Both read
the ``run_stopped`` event the runtime writes when it ends a run early."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent

GUARDS = ("wall_limit", "memory_limit")
"""``run_stopped`` reasons that are the tool's limits rather than the protocol's doing."""
WITNESS_PROCS = 3
"""Spinning processes whose last event joins a livelock's witness."""


def time_advances(events: Sequence[TraceEvent]) -> CheckResult:
    """Virtual time advances: no process busy-loops at one instant (the simulator stops a
    run after :data:`elastic_sim.sim.kernel.LIVELOCK_CALLS` callbacks at one time)."""
    res = CheckResult("time_advances", "virtual time advances (no busy loop at one instant)")
    hist = neutral(events)
    stop = hist.last("run_stopped")
    if hist.of("run_end"):
        res.checked = 1
    if stop is None or stop.get("reason") != "livelock":
        return res
    spinning = [str(k) for k in dict(stop.get("spinning") or {})]
    procs = list(dict.fromkeys(k.rpartition(":")[0] for k in spinning))[:WITNESS_PROCS]
    last: list[TraceEvent] = []
    for proc in procs:
        ev = next((e for e in reversed(hist) if e.proc == proc and e is not stop), None)
        if ev is not None:
            last.append(ev)
    last.sort(key=lambda e: e.t)
    res.violations.append(Violation(
        f"livelock: {stop.get('message')}; spinning: {', '.join(spinning[:WITNESS_PROCS])}",
        [*last, stop]))
    return res


def within_run_guards(events: Sequence[TraceEvent]) -> CheckResult:
    """The run ended within the tool's guards (``--wall-limit``, ``--memory-limit``); one
    that ran out of them is reported with what was traced until then."""
    res = CheckResult("within_run_guards", "the run ends within the wall-clock and memory "
                                           "guards")
    hist = neutral(events)
    stop = hist.last("run_stopped")
    if hist.of("run_end"):
        res.checked = 1
    if stop is None or stop.get("reason") not in GUARDS:
        return res
    before = next((e for e in reversed(hist) if e is not stop and e.kind != "run_end"
                   and e.proc != "elastic-sim"), None)
    res.violations.append(Violation(f"stopped by the {stop.get('reason')} guard: "
                                    f"{stop.get('message')}",
                                    [e for e in (before, stop) if e is not None]))
    return res
