"""torchft's per-step checks, over each rank's committed steps (``step`` with its shard,
state digest and data position), its should_commit votes (``ft_should_commit``) and its
heals (``ft_heal``): replicas at one step hold one state and one data position, a step
advances only on its replica group's unanimous vote, a recovering replica group heals
from one source, and training goes on after the faults stop. They read torchft's own
event kinds (the protocol-neutral vocabulary is not in this tree yet); a trace of another
protocol has none of them, and they examine nothing there."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.facts import (
    cut_groups,
    fault_events,
    host_of,
    knobs_of,
    run_end,
    run_start,
)
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.faults.base import Healing
from elastic_sim.faults.model import ENDS_A_HOST, FAULT_TYPES
from elastic_sim.history import History, history
from elastic_sim.trace import TraceEvent

SLACK_S = 10.0
"""Seconds :func:`ft_liveness` allows beyond the knobs' timeouts: a rank's start (1.3 s in
the sim), a heal, a step."""
LOST = tuple(c.scenario_type for c in ENDS_A_HOST)


def _agreement(events: Sequence[TraceEvent], field: str, name: str, what: str
               ) -> CheckResult:
    """Replicas' committed steps of one quorum, one step and one shard agree on
    ``field``."""
    res = CheckResult(name, f"replicas at equal step hold identical {what}",
                      unit="steps")
    first: dict[tuple[object, object, object], TraceEvent] = {}
    for ev in history(events).of("step"):
        if ev.get("shard") is None or ev.get(field) is None:
            continue  # not a torchft rank's step
        key = (ev.get("round"), ev.get("step"), ev.get("shard"))
        had = first.setdefault(key, ev)
        if had is ev:
            res.checked += 1
        elif had.get(field) != ev.get(field):
            res.violations.append(Violation(
                f"quorum {key[0]} step {key[1]} shard {key[2]}: {had.host} holds {what} "
                f"{had.get(field)}, {ev.host} holds {ev.get(field)}", [had, ev]))
    return res


def ft_state_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """The replicas that commit a step in one quorum hold the same state after it, shard
    by shard (a healed replica included)."""
    return _agreement(events, "digest", "ft_state_agreement", "state")


def ft_data_position_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """The replicas that commit a step in one quorum have drawn as many batches of their
    data shards (their data positions agree), so they run out of data together."""
    return _agreement(events, "data", "ft_data_position_agreement", "data position")


def ft_unanimous_commit(events: Sequence[TraceEvent]) -> CheckResult:
    """A replica group's ranks all get the same should_commit decision, a yes only when
    every one of its ``ranks_per_replica`` ranks voted yes, and a rank's step advances
    only on a yes."""
    res = CheckResult("ft_unanimous_commit", "a step advances only on the replica group's "
                      "unanimous vote", unit="votes")
    ranks = int(knobs_of(events).get("ranks_per_replica", 1))
    votes: dict[tuple[object, object, int], list[TraceEvent]] = {}
    decided: dict[str, TraceEvent] = {}
    """A rank process -> its last should_commit."""
    for ev in history(events).of("proc_start", "ft_should_commit", "step"):
        if ev.kind == "proc_start":
            decided.pop(ev.proc, None)
        elif ev.kind == "ft_should_commit":
            step = int(ev.get("step")) - (1 if ev.get("decision") else 0)
            votes.setdefault((ev.get("replica_id"), ev.get("quorum_id"), step), []).append(ev)
            decided[ev.proc] = ev
        elif ev.get("shard") is not None:
            last = decided.get(ev.proc)
            if last is None or not last.get("decision") or last.get("step") != ev.get("step"):
                res.violations.append(Violation(
                    f"{ev.proc} committed step {ev.get('step')} without a yes from its "
                    "replica group", [e for e in (last, ev) if e is not None]))
    for (replica, quorum, step), evs in votes.items():
        res.checked += 1
        decisions = {bool(e.get("decision")) for e in evs}
        if len(decisions) > 1:
            res.violations.append(Violation(
                f"replica {replica} step {step + 1} (quorum {quorum}): its ranks got "
                "different decisions", evs[:2]))
        elif True in decisions and (len(evs) < ranks or not all(e.get("vote") for e in evs)):
            res.violations.append(Violation(
                f"replica {replica} committed step {step + 1} (quorum {quorum}) with "
                f"{sum(bool(e.get('vote')) for e in evs)} yes votes of {ranks} ranks",
                evs[:2]))
    return res


def ft_single_heal_source(events: Sequence[TraceEvent]) -> CheckResult:
    """All the ranks of a recovering replica group heal from one source replica."""
    res = CheckResult("ft_single_heal_source", "all local ranks of a recovering replica "
                      "heal from one source", unit="heals")
    heals: dict[tuple[object, object], list[TraceEvent]] = {}
    for ev in history(events).of("ft_heal"):
        heals.setdefault((ev.get("replica_id"), ev.get("quorum_id")), []).append(ev)
    for (replica, quorum), evs in heals.items():
        res.checked += 1
        sources = sorted({str(e.get("src")) for e in evs})
        if len(sources) > 1:
            ranks = {str(e.get("src")): e for e in evs}
            res.violations.append(Violation(
                f"replica {replica} healed in quorum {quorum} from {', '.join(sources)}: "
                "its ranks took their shards from different replicas",
                [ranks[s] for s in sources]))
    return res


def ft_liveness(events: Sequence[TraceEvent]) -> CheckResult:
    """Once the last fault stops (it heals, or, for one that does not, it starts), some
    rank commits a step within the bound the knobs imply (the longest of the Manager's
    timeouts, a heartbeat's expiry, the wait for stragglers, and :data:`SLACK_S`), unless
    the job completed first or the Lighthouse is gone for good (nothing can form a
    quorum then). A run that ended at its time limit before the bound is not judged, nor
    one whose ranks stopped by the job's own rule (``job_done``: their data ran out, failed
    steps consuming batches too) and that ended within the bound."""
    res = CheckResult("ft_liveness", "a committed step within the knobs' bound after the "
                      "faults stop", unit="runs")
    hist = history(events)
    if not hist.of("lh_quorum", "lh_start"):
        return res  # not torchft
    faults = fault_events(hist)
    end = run_end(hist)
    if not faults or end is None:
        return res
    k = knobs_of(hist)
    longest = max(float(k.get(n, 0.0)) for n in ("timeout", "quorum_timeout", "pg_timeout",
                                                 "connect_timeout"))
    beat = float(k.get("heartbeat_timeout", 0.0))
    bound = longest + beat + min(float(k.get("join_timeout", 0.0)), beat) + SLACK_S
    start = run_start(hist)
    lighthouse = str(start.get("coordinator")) if start is not None else ""
    if any(ev.get("phase") == "start" and ev.get("type") in LOST
           and str(ev.get("target")).split("/")[0] == lighthouse for ev in faults):
        return res  # the Lighthouse is gone for good
    quiet = faults[-1]  # the last fault's start or heal
    done = [ev.t for ev in hist.of("job_done")]
    if done and max(done) <= quiet.t:
        return res  # the job was over before the faults stopped
    if end.t < quiet.t + bound and end.get("outcome") == "hung":
        return res  # the time limit came first
    res.checked = 1
    steps = [ev for ev in hist.of("step") if quiet.t <= ev.t <= quiet.t + bound]
    # ended in time: completed, or the ranks left by their own stop rule (their data ran
    # out: failed steps consume batches too) and the run ended
    ended = end.t <= quiet.t + bound and end.get("outcome") != "hung" and (
        end.get("outcome") == "completed" or any(t >= quiet.t for t in done))
    if not steps and not ended:
        after = next((ev for ev in hist.of("step", "job_done", "job_failed")
                      if ev.t >= quiet.t), end)
        res.violations.append(Violation(
            f"no committed step within {bound:g} s after {quiet.get('id')} "
            f"{'healed' if quiet.get('phase') == 'heal' else 'started'} at {quiet.t:g} s",
            [quiet, after]))
    return res


def _named_hosts(ev: TraceEvent, hosts: set[str]) -> set[str]:
    """The hosts among ``hosts`` a fault event names: a cut's groups, else the host of its
    target (a host or a process)."""
    groups = cut_groups(ev)
    target = ev.get("target")
    named = ({h for g in groups for h in g} if groups is not None
             else {host_of(target)} if isinstance(target, str) else set())
    return named & hosts


def _launcher_starts(hist: History, first: list[TraceEvent]) -> list[list[float]]:
    """When one group's launcher started its ranks, per launcher (a host restarted runs a
    new one): ``[t of attempt 0, t of attempt 1, ...]``. ``first`` are the group's
    ``ft_replica_start`` events; the protocol-neutral history has a ``restart`` of the
    launcher's process for each start after the first."""
    procs = {ev.proc for ev in first}
    runs: list[list[float]] = []
    for ev in hist.of("ft_replica_start", "restart"):
        if ev.proc not in procs:
            continue
        if ev.kind == "ft_replica_start" and not ev.get("attempt"):
            runs.append([ev.t])
        elif runs:
            runs[-1].append(ev.t)
    return runs


def _replica_groups(hist: History) -> tuple[list[TraceEvent], str, list[str]] | None:
    """A torchft run's launcher starts (``ft_replica_start``), its Lighthouse's host and
    its replica groups' hosts; None for a trace of another protocol."""
    starts = hist.of("ft_replica_start")
    if not starts or not hist.of("lh_quorum", "lh_start"):
        return None
    run = run_start(hist)
    lighthouse = str(run.get("coordinator")) if run is not None else ""
    return starts, lighthouse, sorted({ev.host for ev in starts})


def ft_fault_isolation(events: Sequence[TraceEvent]) -> CheckResult:
    """A replica group that no fault touched keeps training through the other groups'
    failures: its launcher never has to restart its ranks after an error, from the first
    fault until the job completes. Judged only while the faults are local to other
    replica groups (each names its hosts, none the Lighthouse's): a fault on the
    Lighthouse or one that names no host may fail every group."""
    res = CheckResult("ft_fault_isolation", "a replica group no fault touched trains on "
                      "through the others' failures", unit="replica groups")
    hist = history(events)
    found = _replica_groups(hist)
    if found is None:
        return res  # not torchft
    _, lighthouse, groups = found
    faults = [ev for ev in fault_events(hist) if ev.get("phase") == "start"]
    if not faults:
        return res
    touched: set[str] = set()
    for ev in faults:
        named = _named_hosts(ev, {*groups, lighthouse})
        if not named or lighthouse in named:
            return res  # a fault everyone may feel
        touched |= named
    done = [ev.t for ev in hist.of("job_done")]
    until = min(done) if done else float("inf")
    first = faults[0]
    for host in groups:
        if host in touched:
            continue
        res.checked += 1
        failed = next((ev for ev in hist.of("ft_replica_failed")
                       if ev.host == host and first.t <= ev.t <= until), None)
        if failed is not None:
            res.violations.append(Violation(
                f"replica group {host}, which no fault touched, failed at {failed.t:g} s "
                f"(its ranks' exit codes {failed.get('exit_codes')}) after {first.get('id')} "
                f"hit {first.get('target')} at {first.t:g} s", [first, failed]))
    return res


ONE_SHOT = tuple(sorted(
    tag for tag, cls in FAULT_TYPES.items()
    if not issubclass(cls, Healing) and not cls.ends_host
    and tag not in ("crash_loop", "gpu_wedge", "slow_start")))
"""Fault types that act once, when they start (a process killed or signalled, a
connection reset, a collective failed, a clock jumped); the others last until they heal
(or for good): a host down, a cut, a hang, a bad node's crash loop, a wedged GPU."""

RESTART_SLACK_S = 5.0
"""Seconds before a launcher's start of its ranks within which a fault still explains
that start's failure in :func:`ft_group_recovers` (a cut healed just before the start
can still cost its first heartbeats and quorum request)."""


def ft_group_recovers(events: Sequence[TraceEvent]) -> CheckResult:
    """A replica group whose launcher gives up spent its restarts on faults: every start
    of its ranks that failed overlapped a fault against the group (one naming its host or
    one of its processes, or one every group may feel: on the Lighthouse, or naming no
    host). A start that failed with no fault against it is the group's own restart loop
    (its host is healthy; the group is lost for the rest of the job and the others train
    on without it). A fault that acts once (:data:`ONE_SHOT`: a process killed) on a
    group is against the start it hit (the first of the group's starts to fail after it:
    a collective fault armed between starts hits the next one); one that lasts, or one
    every group feels (the Lighthouse's process killed: nothing starts it again), against
    every start until it heals (and :data:`RESTART_SLACK_S` after); a fault that ends a
    host (:data:`LOST`: its "heal" is the grace's end) never heals. A start that failed
    after some group completed the job is not judged (its quorum may wait for groups
    that are gone).
    Judged for every group whose ranks failed at least once."""
    res = CheckResult("ft_group_recovers", "a replica group on a healthy host is given up "
                      "only after faults spent its restarts", unit="replica groups")
    hist = history(events)
    found = _replica_groups(hist)
    if found is None:
        return res  # not torchft
    starts, lighthouse, groups = found
    # each fault's span and the groups it is against (all of them: a fault on the
    # Lighthouse or one that names no host)
    opened: dict[str, TraceEvent] = {}
    spans: list[tuple[float, float, set[str], TraceEvent]] = []
    for ev in fault_events(hist):
        fid = str(ev.get("id"))
        if ev.get("phase") == "start":
            opened[fid] = ev
            named = _named_hosts(ev, {*groups, lighthouse})
            everyone = not named or lighthouse in named
            against = set(groups) if everyone else named
            # a kill acts once on a group (its launcher starts the ranks again), but a
            # Lighthouse killed stays dead, and one that names no host may act anywhere
            lasts = float(ev.t) if ev.get("type") in ONE_SHOT and not everyone \
                else float("inf")
            spans.append((ev.t, lasts, against, ev))
        elif fid in opened and ev.get("type") not in LOST:  # a host's end is for good
            first = opened.pop(fid)
            spans = [(s, ev.t if f is first else e, a, f) for s, e, a, f in spans]
    done = [ev.t for ev in hist.of("job_done")]
    until = min(done) if done else float("inf")  # after it, a group may wait for nobody
    gave_up = {ev.host: ev for ev in hist.of("job_failed")
               if str(ev.get("error", "")).startswith("replica group")}
    for host in groups:
        mine = [ev for ev in starts if ev.host == host]
        failed = [ev for ev in hist.of("ft_replica_failed") if ev.host == host]
        if not failed:
            continue
        res.checked += 1
        end = gave_up.get(host)
        if end is None:
            continue
        runs = _launcher_starts(hist, mine)
        # a one-shot fault is against the start it hit: the first of the group's to fail
        # after it (a kill ends the start it hit; an armed collective fault, the next
        # start's first collective)
        struck = (next((f for f in failed if f.t >= s), None) for s, e, a, _ in spans
                  if s == e and host in a)
        hit_by_one_shot = {id(f) for f in struck if f is not None}
        alone: list[TraceEvent] = []
        for f in failed:
            run = next((r for r in reversed(runs) if r[0] <= f.t), [])
            k = int(f.get("attempt") or 0)
            begun = run[k] if k < len(run) else f.t
            if f.t <= until and id(f) not in hit_by_one_shot and not any(
                    host in a and s <= f.t and s != e and e >= begun - RESTART_SLACK_S
                    for s, e, a, _ in spans):
                alone.append(f)
        if alone:
            hit = [fe for s, e, a, fe in spans if host in a and s <= end.t]
            what = (f"{len(hit)} fault(s) against it (the first: {hit[0].get('id')} at "
                    f"{hit[0].t:g} s)" if hit else "no fault against it")
            res.violations.append(Violation(
                f"replica group {host} was given up at {end.t:g} s after {len(failed)} "
                f"failed starts with {what}: {len(alone)} of them failed with no fault "
                f"against the group (the first at {alone[0].t:g} s, attempt "
                f"{alone[0].get('attempt')}), a restart loop on a healthy host",
                [*hit[:1], alone[0], end]))
    return res
