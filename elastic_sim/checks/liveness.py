"""Liveness checks: the run ends (a clear terminal error, not a hang), progress resumes
after the last fault heals, and no host loops through rounds without progress."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.trace import TraceEvent

PROGRESS = ("step", "commit", "job_done", "job_failed")
LOOP_ROUNDS = 20
"""Rounds a process may complete in a row, after the last fault, without any progress."""
PROGRESS_BOUND = 600.0
"""Seconds after the last fault heals within which the job must progress or end."""


def _last_fault(events: Sequence[TraceEvent]) -> TraceEvent | None:
    faults = [e for e in events if e.kind == "fault" and e.get("phase") in ("start", "heal")]
    return faults[-1] if faults else None


def terminates(events: Sequence[TraceEvent]) -> CheckResult:
    """The run ends: every process exits (with success or a clear error) before the time
    limit, instead of hanging. A run the runtime stopped early (``run_stopped``) is judged
    by :mod:`checks.bounded` instead."""
    res = CheckResult("terminates", "the job ends (done or a clear error) instead of hanging")
    end = next((e for e in reversed(events) if e.kind == "run_end"), None)
    if end is None:
        return res
    res.checked = 1
    if end.get("outcome") == "hung" and not any(e.kind == "run_stopped" for e in events):
        last = next((e for e in reversed(events) if e.kind in PROGRESS or e.kind == "fault"),
                    None)
        res.violations.append(Violation(
            f"the run was still going at the time limit ({end.t:g} s) without ending",
            [e for e in (last, end) if e is not None]))
    return res


def progress_after_faults(events: Sequence[TraceEvent]) -> CheckResult:
    """After the last fault starts or heals, the job makes progress or ends within
    :data:`PROGRESS_BOUND` seconds."""
    res = CheckResult("progress_after_faults",
                      f"progress or an end within {PROGRESS_BOUND:g} s of the last fault")
    last = _last_fault(events)
    if last is None:
        return res
    res.checked = 1
    nxt = next((e for e in events if e.t >= last.t and e.kind in PROGRESS), None)
    end = next((e for e in reversed(events) if e.kind == "run_end"), None)
    if nxt is not None and nxt.t - last.t <= PROGRESS_BOUND:
        return res
    if end is not None and end.get("outcome") != "hung" and end.t - last.t <= PROGRESS_BOUND:
        return res  # every process ended: nothing left to progress
    res.violations.append(Violation(
        f"no progress within {PROGRESS_BOUND:g} s after the last fault ({last.get('id')})",
        [e for e in (last, nxt or end) if e is not None]))
    return res


def no_restart_loop(events: Sequence[TraceEvent]) -> CheckResult:
    """After the last fault, no process completes more than :data:`LOOP_ROUNDS` rounds in
    a row without any progress in between."""
    res = CheckResult("no_restart_loop",
                      f"no more than {LOOP_ROUNDS} rounds in a row without progress")
    last = _last_fault(events)
    quiet_from = last.t if last is not None else 0.0
    streak: dict[str, list[TraceEvent]] = {}
    flagged: set[str] = set()
    for ev in events:
        if ev.kind in PROGRESS:
            streak.pop(ev.proc, None)
        elif ev.kind == "rdzv_done" and ev.t >= quiet_from:
            run = streak.setdefault(ev.proc, [])
            run.append(ev)
            res.checked += 1
            if len(run) > LOOP_ROUNDS and ev.proc not in flagged:
                flagged.add(ev.proc)
                res.violations.append(Violation(
                    f"{ev.proc} completed {len(run)} rounds in a row without progress",
                    [run[0], run[-1]]))
    return res


CONVERGE_BOUND = 60.0
"""Quiet seconds (no fault) before the job's end after which the world must have converged."""


def world_converges(events: Sequence[TraceEvent]) -> CheckResult:
    """After a quiet phase of :data:`CONVERGE_BOUND` seconds without faults, the last round
    before the job completes holds every host that wants in (joined a round after the last
    fault and still runs when the job completes), up to max_nodes / max_hosts. Judged for
    protocols whose rounds count hosts (not Horovod's slots)."""
    res = CheckResult("world_converges",
                      f"after {CONVERGE_BOUND:g} quiet seconds the world holds the available "
                      "hosts, up to the maximum")
    start = next((e for e in events if e.kind == "run_start"), None)
    knobs = (start.get("knobs") or {}) if start is not None else {}
    cap = knobs.get("max_nodes", knobs.get("max_hosts"))
    if not isinstance(cap, int) or "reset_limit" in knobs:
        return res
    last = _last_fault(events)
    quiet = last.t if last is not None else 0.0
    done = next((e for e in events if e.kind == "job_done"), None)
    if done is None or done.t - quiet < CONVERGE_BOUND:
        return res
    final = [e for e in events if e.kind == "rdzv_done" and e.t <= done.t]
    if not final:
        return res
    res.checked = 1
    world = final[-1]
    live: dict[str, int] = {}
    wants: dict[str, TraceEvent] = {}
    for ev in events:
        if ev.t > done.t:
            break
        if ev.kind == "proc_start":
            live[ev.host] = live.get(ev.host, 0) + 1
        elif ev.kind == "proc_exit":
            live[ev.host] = live.get(ev.host, 0) - 1
        elif ev.kind == "rdzv_join" and ev.t >= quiet:
            wants.setdefault(ev.host, ev)
    available = [h for h in wants if live.get(h, 0) > 0]  # still running at the job's end
    members = [str(m).split(":", 1)[0] for m in world.get("members", [])]
    missing = [h for h in available if h not in members]
    if missing and len(members) < cap:
        res.violations.append(Violation(
            f"{CONVERGE_BOUND:g}+ s after the last fault the world is {len(members)} hosts "
            f"without {', '.join(missing)}, which wanted in (max {cap})",
            [wants[missing[0]], world, done]))
    return res
