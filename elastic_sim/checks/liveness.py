"""Liveness checks: the run ends (a clear terminal error, not a hang), the job progresses
after every fault starts and after it heals (a failure it could have avoided is not
progress), and no host loops through rounds that train nothing with nothing to explain
them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from elastic_sim.checks.capacity import WORLD, Capacity, job_failure, members, replay
from elastic_sim.checks.facts import PROGRESS, Cluster, Limits, fault_events, run_end, run_limits
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.faults.model import CrashAtStart
from elastic_sim.history import History, neutral
from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import recorded


def terminates(events: Sequence[TraceEvent]) -> CheckResult:
    """The run ends: every process exits (with success or a clear error) before the time
    limit, instead of hanging. A run the runtime stopped early (``run_stopped``) is judged
    by :mod:`checks.bounded` instead; one whose time limit came before the knobs' progress
    bound after its last fault started or healed, its job not completed, is not judged (the
    job may still have been recovering as the protocol is allowed to), and says so; nor is
    one whose processes had all exited before the limit (it waited for a host still to
    start: nothing hung)."""
    res = CheckResult("terminates", "the job ends (done or a clear error) instead of hanging",
                      unit="runs")
    hist = neutral(events)
    end = run_end(hist)
    if end is None:
        return res
    if end.get("outcome") == "hung" and not hist.of("run_stopped"):
        res.not_judged = _nothing_running(hist, end) or _cut_short(hist, end)
        if res.not_judged:
            return res
    res.checked = 1
    if end.get("outcome") == "hung" and not hist.of("run_stopped"):
        last = next((e for e in reversed(hist) if e.kind in PROGRESS or e.kind == "fault"),
                    None)
        res.violations.append(Violation(
            f"the run was still going at the time limit ({end.t:g} s) without ending",
            [e for e in (last, end) if e is not None]))
    return res


def _nothing_running(hist: History, end: TraceEvent) -> str:
    """Why a run that hung at its time limit cannot be judged when every process it started
    had exited before then: nothing hung, the run waited for a host still to start (a host
    restart or a late start scheduled after the limit); "" when a process still ran (one
    that real mode killed at the limit, its exit recorded then, still ran)."""
    running: dict[str, int] = {}
    for ev in hist.of("proc_start", "proc_exit"):
        if ev.kind == "proc_exit" and ev.t >= end.t:
            continue
        running[ev.proc] = running.get(ev.proc, 0) + (1 if ev.kind == "proc_start" else -1)
    if any(n > 0 for n in running.values()) or not running:
        return ""
    return (f"every process had exited before the time limit ({end.t:g} s): the run waited "
            "for a host still to start after it, and nothing hung")


def _cut_short(hist: History, end: TraceEvent) -> str:
    """Why a run that hung at its time limit cannot be judged: the limit came before the
    knobs' progress bound after the last fault started or healed, or after an agent's last
    restart for a failure with restarts left (each failed world may take the bound again:
    survivors waiting out a collective's timeout, restarting, waiting again, until the
    budget ends the job with a clear error), while the job could still recover, or, once
    the job completed, after a host's first process started anew
    (a host restarted after the completion waits for a world as a new one would, even
    once the coordinator is gone: it ends at its own timeout); "" when it did not (once
    the job completed, what is left is its shutdown; once its coordinator is gone before
    the completion, nothing recovers it)."""
    faults = fault_events(hist)
    limits = run_limits(hist)
    if not faults or limits is None:
        return ""
    done = hist.first("job_done")
    if done is None:
        at = faults[-1].t
        phase = "started" if faults[-1].get("phase") == "start" else "healed"
        since = f"{faults[-1].get('id')} {phase}"
        # a recovery still under way: a failure restart with restarts left
        again = next((e for e in reversed(hist.of("restart")) if e.get("failure")
                      and e.get("spent") and (e.get("left") or 0) > 0), None)
        if again is not None and again.t > at:
            at, since = again.t, (f"{again.host}'s agent restarted for a failure with "
                                  f"{again.get('left')} restart(s) left")
    else:  # a host's first process that began after the completion (its entry, when slowed)
        begun = [(e.t + _slowed(e), e.host) for e in hist.of("proc_start")
                 if e.proc == f"{e.host}/main" and e.t + _slowed(e) > done.t]
        if not begun:
            return ""
        at, host = max(begun)
        since = f"{host}'s first process started again after the job completed"
    if end.t >= at + limits.progress_s:
        return ""
    *_, (_, cap) = replay(hist)
    coord = cap.cluster.coordinator
    if done is None and coord is not None and not cap.cluster.usable(coord):
        return ""  # nothing recovers the job (a process begun after it completed only waits)
    return (f"the time limit ({end.t:g} s) came {end.t - at:g} s after {since}, within "
            f"the {limits.progress_s:g} s the knobs allow a recovery "
            f"({limits.progress_by or 'the progress bound'}): a longer time_limit judges it")


def _slowed(start: TraceEvent) -> float:
    """Seconds a ``slow_start`` delayed the entry of the process ``start`` began."""
    slowed = start.get("slowed")
    return float(slowed) if isinstance(slowed, (int, float)) else 0.0


NEW_WORLD = (*WORLD, "epoch_decided")
"""Events that show a world formed (or its membership decided)."""
ENDS = ("job_done", "job_failed")
"""A host's end of the job."""


def progress_after_faults(events: Sequence[TraceEvent]) -> CheckResult:
    """After every fault starts and after it heals, the job makes progress (a step, a
    commit, completion) or ends with an error it could not avoid (too few hosts could go
    on), within the bound the knobs imply (each phase of a recovery once: the failure seen,
    the workers stopped, a world formed or the join deadline passed). A fault that never
    heals is judged from its start; one that comes once the job has failed is not judged.
    And once a fault has taken down a member of the world while enough hosts could go on
    and their workers had work left, the survivors form a new world (or progress, or the
    job ends) within what the protocol could see of the death, where it sees one (its
    heartbeat expiry, polls and last call), not only once a timeout tells them. A fault
    that starts or heals once the job's result exists (its first ``job_done``) is not
    judged either, nor the start of a fault that takes the coordinator's host out of the
    cluster while it lasts (a hang of it, a partition that leaves it alone) and heals: no
    protocol with that coordinator can progress until it returns, so its heal is judged."""
    res = CheckResult("progress_after_faults",
                      "progress, or an unavoidable end, within the knobs' bound after each "
                      "fault starts or heals", unit="fault events")
    hist = neutral(events)
    faults = fault_events(hist)
    end = run_end(hist)
    if not faults:
        return res
    marks: list[tuple[float, bool, bool]] = []
    """(time, justified, progress) of every progress event and every failure (justified:
    the job could not go on when it failed). Progress at a fault's own instant came before
    it (a fault a step triggers fires as the survivors' steps of that allreduce land)."""
    deaths: list[tuple[TraceEvent, TraceEvent, object, list[str]]] = []
    """(the fault, the member's first process ending, its world's round, the hosts able
    to go on then)."""
    limits: Limits | None = None
    world: list[str] = []
    world_round: object = None
    done: dict[str, bool] = {}
    """Host -> whether its workers finished their work (their last one exited 0): once
    every survivor's have, a death needs no new world."""
    coordinator_killed: TraceEvent | None = None
    """The coordinator's first process ended by a fault (horovodrun killed, say), or the
    fault that took its host before it ever started."""
    last: Capacity | None = None
    outages: set[str] = set()
    """Ids of faults that take the coordinator's host out while they last (then: and heal)."""
    for ev, cap in replay(hist):
        limits, last = cap.limits, cap
        if ev.kind == "fault" and _takes_out(ev, cap.cluster):
            outages.add(str(ev.get("id")))
        elif ev.kind in PROGRESS:
            marks.append((ev.t, True, True))
        elif ev.kind == "job_failed":
            marks.append((ev.t, not cap.enough(ev.t), False))
        elif ev.kind in WORLD:
            world, world_round = members(ev), ev.get("round")
        elif ev.kind in ("proc_start", "proc_exit") and ev.proc != f"{ev.host}/main":
            done[ev.host] = ev.kind == "proc_exit" and ev.get("code") == 0  # a worker
        elif ev.kind == "proc_exit" and ev.get("code") != 0:  # the host's first process
            hit = cap.cluster.last_hit.get(ev.host)
            if (hit is not None and hit.kind == "fault" and ev.host == cap.cluster.coordinator
                    and (ev.get("code", 0) < 0 or _failed_at_start(ev))):
                coordinator_killed = ev  # killed, or a crash loop's start: not its failure
            if (hit is not None and hit.kind == "fault" and ev.host in world
                    and not all(done.get(h) for h in world if h != ev.host)
                    and cap.enough(ev.t)):
                deaths.append((hit, ev, world_round, cap.able(ev.t) + cap.coming(ev.t)))
    if limits is None:
        return res
    late = _after_failure(hist)
    result = hist.first("job_done")
    if result is not None:  # the job's result exists: what comes after it has nothing to do
        late |= {id(f) for f in faults if f.t >= result.t}
    if coordinator_killed is None and last is not None and last.cluster.coordinator:
        coord = last.cluster.coordinator
        hit = last.cluster.last_hit.get(coord)
        if coord not in last.cluster.alive and hit is not None and hit.kind == "fault":
            coordinator_killed = hit  # its host was lost before it ever started
    if (coordinator_killed is not None and end is not None
            and end.get("outcome") == "failed"
            and not hist.occurs("job_failed", coordinator_killed.t, end.t)):
        # a fault ended the job's coordinator and, with it, the job (nobody is left to
        # record its failure: horovodrun is the job): an end the job could not avoid, and
        # faults after it find nothing left to progress
        marks.append((coordinator_killed.t, True, False))
        late |= {id(f) for f in faults if f.t > coordinator_killed.t}
    for fault, death, rnd, able in deaths:
        if id(death) not in late and _rejoined(res, hist, limits, (fault, death, rnd), able,
                                               end):
            break
    bound = limits.progress_s
    completed = end is not None and end.get("outcome") == "completed"
    outages &= {str(f.get("id")) for f in faults if f.get("phase") == "heal"}  # they heal
    for fault in faults:
        horizon = fault.t + bound
        if id(fault) in late:
            continue  # the job had failed already: nothing left to progress
        if fault.get("phase") == "start" and str(fault.get("id")) in outages:
            continue  # the coordinator is out until the heal, which is judged
        if end is not None and end.t < horizon and end.get("outcome") == "hung":
            continue  # the time limit came first: not judged (terminates says it hung)
        res.checked += 1
        ok = any((fault.t < t if prog else fault.t <= t) and t <= horizon and just
                 for t, just, prog in marks) or hist.occurs(
            "step", math.nextafter(fault.t, math.inf), horizon)  # one replay leaves out
        if ok or (completed and end is not None and end.t <= horizon):
            continue
        nxt = next((e for e in hist if (e.t > fault.t and e.kind in PROGRESS)
                    or (e.t >= fault.t and e.kind == "job_failed")), end)
        phase = "started" if fault.get("phase") == "start" else "healed"
        res.violations.append(Violation(
            f"no progress within {bound:g} s after {fault.get('id')} {phase} at {fault.t:g} s"
            + (f" (next: {nxt.kind} at {nxt.t:g} s)" if nxt is not None else "")
            + (f"; the bound: {limits.progress_by}" if limits.progress_by else ""),
            [e for e in (fault, nxt) if e is not None]))
        break
    return res


def _failed_at_start(exit_: TraceEvent) -> bool:
    """Whether a process exit is a crash loop's doing: the process failed at start-up
    (:class:`~elastic_sim.faults.model.CrashAtStart`), before it did anything of its own."""
    return str(exit_.get("reason", "")).startswith(CrashAtStart.__name__)


def _takes_out(fault: TraceEvent, cluster: Cluster) -> bool:
    """Whether a fault's start (``cluster`` with it taken into account) takes the
    coordinator's host out of the cluster while it lasts: it hit that host, which is now
    frozen or cut off from every other host up."""
    coord = cluster.coordinator
    if coord is None or fault.get("phase") != "start" or cluster.last_hit.get(coord) is not fault:
        return False
    others = [h for h in cluster.alive if h != coord and cluster.is_alive(h)]
    return cluster.is_frozen(coord) or (
        bool(others) and all(cluster.is_cut(coord, h) for h in others))


def _after_failure(hist: History) -> set[int]:
    """The ids of the events recorded after the failure the job ended with
    (:func:`~elastic_sim.checks.capacity.job_failure`)."""
    failure = job_failure(hist)
    if failure is None:
        return set()
    at = next(i for i, ev in enumerate(hist.plain) if ev is failure)
    return {id(ev) for ev in hist.plain[at + 1:]}


def _rejoined(res: CheckResult, hist: History, limits: Limits,
              died: tuple[TraceEvent, TraceEvent, object], able: list[str],
              end: TraceEvent | None) -> bool:
    """Judge one member's death (the fault, its first process ending, the round of its
    world): the survivors form a new world, progress or end within
    :attr:`~elastic_sim.checks.facts.Limits.rejoin_s` of it. Whether it is a violation."""
    fault, death, rnd = died
    bound = limits.rejoin_s
    if bound is None:
        return False
    horizon = death.t + bound
    if end is not None and end.t < horizon and end.get("outcome") == "hung":
        return False  # the time limit came first: not judged
    res.checked += 1
    nxt = next((e for e in hist if e.t > death.t and (
        e.kind in PROGRESS or e.kind in ENDS or (e.kind in NEW_WORLD and e.get("round") != rnd))),
        end)
    if (hist.occurs("step", math.nextafter(death.t, math.inf), horizon)
            or (nxt is not None and nxt.t <= horizon)):
        return False
    res.violations.append(Violation(
        f"{death.host} ({fault.get('id')}, {fault.get('type')}) died at {death.t:g} s with "
        f"{len(able)} hosts able to go on ({', '.join(able)}; the minimum "
        f"{limits.min_hosts}), but no new world formed and no step came within {bound:g} s "
        f"({limits.rejoin_by}): the survivors waited"
        + (f" (next: {recorded(nxt).kind} at {nxt.t:g} s)" if nxt is not None else ""),
        [e for e in (fault, death, nxt) if e is not None]))
    return True


CAUSES = ("fault", "offered", "evict")
"""Events that can explain a new round (plus a host's first process starting)."""
ONE_SHOT = ("collective",)
"""Fault types that strike once, later than they start: the first collective a process of
the host enters fails or hangs."""
LOOP_ROUNDS = 2
"""Unexplained rounds in a row without training that make a loop: one can be the late
detection of an earlier cause, a second cannot."""


def no_restart_loop(events: Sequence[TraceEvent]) -> CheckResult:
    """No process goes through rounds that train nothing, one after the other, with
    nothing to explain them: a round is explained by a fault starting or healing, a host
    arriving, or a change of what discovery offers or an eviction since the process's
    previous round was decided (its first ``rdzv_done``), or by a one-shot collective fault
    not yet spent on one of the process's rounds, and
    none counts while a fault is in force. :data:`LOOP_ROUNDS` unexplained rounds in a
    row without a step between them are a loop, even if a restart budget ends it."""
    res = CheckResult("no_restart_loop",
                      f"no {LOOP_ROUNDS} unexplained rounds in a row without training",
                      unit="rounds")
    streak: dict[str, list[TraceEvent]] = {}
    explained: dict[str, bool] = {}
    flagged: set[str] = set()
    decided: dict[object, float] = {}
    """Round -> when its membership was first recorded (by any member)."""
    cause_t = float("-inf")
    """When the latest cause came."""
    one_shots = 0
    """One-shot collective faults so far: each explains the first round of every process
    that comes quiet after it (it strikes the first collective entered, not at its start)."""
    spent: dict[str, int] = {}
    hist = neutral(events)
    for ev, cap in replay(hist, hist.step_marks()):
        if ev.kind in PROGRESS:
            streak.pop(ev.proc, None)
        elif ev.kind in CAUSES or (ev.kind == "proc_start" and ev.proc == f"{ev.host}/main"):
            explained = dict.fromkeys(explained, True)
            cause_t = ev.t
            if ev.kind == "fault" and ev.get("type") in ONE_SHOT and ev.get("phase") == "start":
                one_shots += 1
        elif ev.kind == "rdzv_done":
            res.checked += 1
            quiet = not cap.cluster.active and not explained.get(ev.proc, True)
            if quiet and spent.get(ev.proc, 0) < one_shots:
                spent[ev.proc] = spent.get(ev.proc, 0) + 1
                quiet = False
            # a cause after the round was decided, before this member recorded it, explains
            # its next round (a member that died as the round completed fails it)
            explained[ev.proc] = cause_t >= decided.setdefault(ev.get("round"), ev.t)
            run = streak.setdefault(ev.proc, [])
            run.append(ev)
            if not quiet:
                streak[ev.proc] = [ev]
                continue
            if len(run) > LOOP_ROUNDS and ev.proc not in flagged:
                flagged.add(ev.proc)
                res.violations.append(Violation(
                    f"{ev.proc} went through {len(run)} rounds in a row without training, "
                    f"the last {LOOP_ROUNDS} with no fault, arrival or discovery change to "
                    "explain them", [run[0], run[-1]]))
    return res
