"""Checks of how a job ends: it fails only when it could not go on, the rendezvous is closed
for everyone only by an end the job could not avoid, and a job that completes shuts down
cleanly (no process ends with an error, the barrier ending the epoch completes)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from elastic_sim.checks.capacity import WORLD, Capacity, job_failure, replay
from elastic_sim.checks.capacity import members as _members
from elastic_sim.checks.facts import host_of, run_end
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import History, neutral
from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import recorded


def _why_enough(cap: Capacity, now: float) -> str:
    able, coming = cap.able(now), cap.coming(now)
    hosts, were = ("host", "was") if len(able) == 1 else ("hosts", "were")
    why = (f"{len(able)} {hosts} ({', '.join(able) or 'none'}) {were} alive, reachable and "
           "within their restart budget (needing no restart, or with one left)")
    if coming:
        why += (f", and {', '.join(coming)} started within the join deadline "
                f"({cap.limits.wait_s:g} s)")
    return f"{why}: at least the minimum {cap.limits.min_hosts}"


def avoidable_job_failure(events: Sequence[TraceEvent]) -> CheckResult:
    """A job that ends failed had no way to go on when it failed: fewer than the minimum
    number of hosts were alive, reachable from the coordinator and within their restart
    budget, or arriving before the join deadline, or the coordinator (or its store) itself
    was gone. Judged at the first ``job_failed`` of a host that was not told to leave (a
    host signalled, preempted or scaled down fails by leaving; the others may go on
    without it)."""
    res = CheckResult("avoidable_job_failure",
                      "the job fails only when fewer than the minimum hosts could go on",
                      unit="job ends")
    hist = neutral(events)
    end = run_end(hist)
    if end is None or end.get("outcome") == "hung":
        return res
    res.checked = 1
    failure = job_failure(hist)
    if failure is None:
        return res
    for ev, cap in replay(hist):
        if ev is not failure:
            continue
        if cap.enough(ev.t):
            res.violations.append(Violation(
                f"the job failed at {ev.t:g} s ({ev.host}: {ev.get('error')}) though "
                f"{_why_enough(cap, ev.t)}", [ev, end]))
        break
    return res


def rendezvous_closed_by_job_end(events: Sequence[TraceEvent]) -> CheckResult:
    """The rendezvous is closed for everyone only by a job end: the closer completed, or
    it failed when the job could not go on (the first closure is judged; later ones find
    it closed already)."""
    res = CheckResult("rendezvous_closed_by_job_end",
                      "the rendezvous is closed only after the job completed or could not go "
                      "on", unit="closures")
    ended: dict[str, TraceEvent] = {}
    for ev, cap in replay(events):
        if ev.kind in ("job_done", "job_failed"):
            ended.setdefault(ev.proc, ev)
        elif ev.kind == "rendezvous_closed":
            res.checked += 1
            if res.checked > 1:
                continue
            why = ended.get(ev.proc)
            if why is not None and why.kind == "job_done":
                continue
            if why is None:
                res.violations.append(Violation(
                    f"{ev.proc} closed the rendezvous before the job ended", [ev]))
            elif cap.enough(ev.t):
                res.violations.append(Violation(
                    f"{ev.proc} closed the rendezvous for everyone after its own failure "
                    f"({why.get('error')}) though {_why_enough(cap, ev.t)}", [why, ev]))
    return res


SHUTDOWN_ERRORS = ("barrier_fail", "rendezvous_close_failed", "job_failed", "worker_error")
"""Events that say a process ran into an error (agents, drivers, workers)."""


def clean_shutdown(events: Sequence[TraceEvent]) -> CheckResult:
    """In a job that completes, every host that finishes it (a member of the last world, or
    the coordinator, alive and reachable at completion) shuts down cleanly: none of its
    processes records an error or exits non-zero from the completion on, and every barrier
    ending the epoch that it enters completes. A process started after the completion (an
    agent added once the job was done) did not finish it and is not judged; nor is a worker
    (a process that joined a process group) on the coordinator's host when that host is not
    in the last world: it was removed from the job before it completed (a coordinator may
    ignore such a worker's exit, as Horovod's driver does). What a fault does is no error of
    the protocol's: a host told to leave is leaving, one a fault hit at the job's end (its
    workers done) ends as the fault made it, and once such a fault took a finisher down
    (the coordinator, its store, a barrier's party: dead, frozen, cut off, or one of its
    processes ended with an error), the others' shutdown is its doing too."""
    res = CheckResult("clean_shutdown",
                      "a completed job shuts down without errors and its exit barrier "
                      "completes", unit="processes")
    hist = neutral(events)
    end = run_end(hist)
    if end is None or end.get("outcome") != "completed":
        return res
    done = hist.first("job_done")
    if done is None:
        return res
    done_at = done.t
    # The first event from the completion on decides who finishes; a training step's
    # (which replay leaves out) is put in its place.
    first = hist.made_first_from(done_at)
    finishers: set[str] = set()
    procs: set[str] = set()
    barrier: dict[str, TraceEvent] = {}
    world: list[str] = []
    late: set[str] = set()
    workers: set[str] = set()
    struck: TraceEvent | None = None
    """The first fault that took a host finishing the job down at its end."""
    cap: Capacity | None = None
    for ev, cap in replay(hist, first):
        if ev.kind in WORLD and ev.t < done_at:
            world = _members(ev)
        if ev.kind == "group_ready":
            workers.add(ev.proc)
        if ev.t >= done_at and not finishers:
            finishers = {h for h in _finishing(world, cap) if cap.cluster.reachable(h)}
        if ev.kind in ("fault", "proc_exit") and struck is None:
            struck = _downed(hist, cap, _finishing(world, cap), done_at, ev)
        host = host_of(ev.proc)
        if ev.kind == "proc_start" and ev.t >= done_at:
            late.add(ev.proc)  # started after the completion (a scale-up): it did not finish it
        if ev.proc in late:
            continue
        if ev.kind == "barrier_enter":
            barrier[ev.proc] = ev
        elif ev.kind == "barrier_trip":
            barrier.pop(ev.proc, None)
        if not finishers or host not in finishers:
            continue
        if ev.proc in workers and host not in world:
            continue  # the coordinator's host, removed from the job: its worker left it
        if struck is not None or _fault_did(cap, hist, host, done_at):
            continue  # what a fault did to the host, or to the shutdown, is no error
        if ev.kind == "proc_exit" and ev.t >= done_at:
            procs.add(ev.proc)
            if ev.get("code") != 0:
                res.violations.append(Violation(
                    f"{ev.proc} exited {ev.get('code')} ({ev.get('reason')}) after the job "
                    "completed", [ev]))
        elif ev.kind in SHUTDOWN_ERRORS and ev.t >= done_at:
            res.violations.append(Violation(
                f"{ev.proc} recorded {recorded(ev).kind} ({ev.get('error')}) after the job "
                "completed", [ev]))
    for proc, enter in sorted(barrier.items()):
        host = host_of(proc)
        if host in finishers and struck is None and cap is not None and not _fault_did(
                cap, hist, host, done_at):
            res.violations.append(Violation(
                f"{proc} entered the exit barrier of round {enter.get('round')} and never "
                "saw it complete", [enter, end]))
    res.checked = len(procs)
    if struck is not None and not res.checked:
        res.not_judged = (f"{struck.get('id')} ({struck.get('type')}) hit a host finishing the "
                          f"job at {struck.t:g} s, at its end: the shutdown is its doing")
    return res


def _finishing(world: list[str], cap: Capacity) -> list[str]:
    """The hosts that would finish the job: the world's members and the coordinator."""
    coord = cap.cluster.coordinator
    return [*world, *([coord] if coord else [])]


def _downed(hist: History, cap: Capacity, hosts: list[str], done_at: float, ev: TraceEvent
            ) -> TraceEvent | None:
    """The fault that took one of ``hosts`` down at the job's end, if one did: it hit the
    host then, and the host is not usable any more, or ``ev`` ends one of its processes
    with an error."""
    for host in hosts:
        hit = cap.cluster.last_hit.get(host)
        if hit is not None and hit.kind == "fault" and _at_end(hist, hit.t, done_at) and (
                not cap.cluster.usable(host) or (ev.kind == "proc_exit" and ev.host == host
                                                 and ev.get("code") not in (0, None))):
            return hit
    return None


def _fault_did(cap: Capacity, hist: History, host: str, done_at: float) -> bool:
    """Whether what the host does in the shutdown is a fault's doing: it was told to leave,
    or a fault hit it at the job's end."""
    hit = cap.cluster.last_hit.get(host)
    return host in cap.cluster.leaving or (hit is not None and _at_end(hist, hit.t, done_at))


def _at_end(hist: History, t: float, done_at: float) -> bool:
    """Whether ``t`` is at the job's end: from its completion (its first ``job_done``) on,
    or after its last step or commit (the workers done, their hosts not yet saying so). A
    step or commit at ``t`` itself is before it: a fault triggered by the last commit fires
    at that commit's instant."""

    def worked(a: float, b: float) -> bool:
        return hist.occurs("step", a, b) or hist.occurs("commit", a, b)

    return t >= done_at or (worked(0.0, t) and not worked(math.nextafter(t, math.inf),
                                                              done_at))
