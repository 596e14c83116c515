"""Safety checks over a trace: pure functions from history to verdict, each violation
with the few events that witness it (Jepsen's checker discipline)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence

from elastic_sim.checks.facts import run_limits
from elastic_sim.checks.verdict import CheckResult as CheckResult
from elastic_sim.checks.verdict import Violation as Violation
from elastic_sim.history import History, history, neutral
from elastic_sim.trace import TraceEvent

MAX_VIOLATIONS = 5
"""Violations kept per check: the first ones are the ones that matter."""


Check = Callable[[Sequence[TraceEvent]], CheckResult]


def _by(events: Sequence[TraceEvent], kind: str, key: str) -> dict[object, list[TraceEvent]]:
    out: dict[object, list[TraceEvent]] = defaultdict(list)
    for ev in neutral(events).of(kind):
        out[ev.get(key)].append(ev)
    return out


def membership_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """One membership per round, and every member that completed the round agrees on it."""
    res = CheckResult("membership_agreement", "one membership per round, agreed by all members",
                      unit="rounds")
    for rnd, evs in _by(events, "rdzv_done", "round").items():
        res.checked += 1
        first = evs[0]
        for ev in evs[1:]:
            if list(ev.get("members", [])) != list(first.get("members", [])):
                res.violations.append(
                    Violation(f"round {rnd}: {ev.host} and {first.host} disagree on members",
                              [first, ev])
                )
                break
        for ev in evs:
            if ev.host not in ev.get("members", []) or ev.get("world_size") != len(
                ev.get("members", [])
            ):
                res.violations.append(
                    Violation(f"round {rnd}: {ev.host} reports a membership that is not its own "
                              "or a world size that does not match it", [ev])
                )
    return res


def rank_validity(events: Sequence[TraceEvent]) -> CheckResult:
    """In every round, ranks are exactly 0..W-1, each held by one member, and, where the
    protocol's members are hosts (not slots, as Horovod's are), no host is listed twice
    (a host counted twice makes a world of fewer hosts than it says: judged where the
    run's knobs name the protocol)."""
    res = CheckResult("rank_validity", "ranks are exactly 0..W-1, one member each",
                      unit="rounds")
    limits = run_limits(neutral(events))
    hosts_listed = limits is not None and not limits.slots_listed
    for rnd, evs in _by(events, "rdzv_done", "round").items():
        res.checked += 1
        members = [str(m) for m in evs[0].get("members", [])]
        twice = sorted({m for m in members if members.count(m) > 1})
        if hosts_listed and twice:
            res.violations.append(Violation(
                f"round {rnd}: {', '.join(twice)} listed more than once in the membership "
                f"{members} (each member is a host)", [evs[0]]))
        world = evs[0].get("world_size", 0)
        holders: dict[int, TraceEvent] = {}
        for ev in evs:
            rank = ev.get("rank")
            if not isinstance(rank, int) or not 0 <= rank < world:
                res.violations.append(
                    Violation(f"round {rnd}: {ev.host} has rank {rank} outside 0..{world - 1}",
                              [ev])
                )
            elif rank in holders and holders[rank].host != ev.host:
                res.violations.append(
                    Violation(f"round {rnd}: rank {rank} held by {holders[rank].host} and "
                              f"{ev.host}", [holders[rank], ev])
                )
            else:
                holders[rank] = ev
            members = ev.get("members", [])
            if ev.host in members and isinstance(rank, int) and members.index(ev.host) != rank:
                res.violations.append(
                    Violation(f"round {rnd}: {ev.host}'s rank {rank} is not its place in the "
                              "agreed member order", [ev])
                )
    return res


def collective_sequence(events: Sequence[TraceEvent]) -> CheckResult:
    """All members of a group enter the same collectives in the same order."""
    res = CheckResult("collective_sequence", "every member enters the same collective sequence",
                      unit="groups")
    hist = neutral(events)
    agreed = _groups_in_agreement(hist)
    if agreed is not None:
        res.checked = agreed
        return res
    for group, evs in _by(hist, "coll_enter", "group").items():
        res.checked += 1
        by_seq: dict[int, TraceEvent] = {}
        for ev in evs:
            seq = ev.get("seq")
            first = by_seq.setdefault(seq, ev)
            if (first.get("op"), first.get("nbytes")) != (ev.get("op"), ev.get("nbytes")):
                res.violations.append(
                    Violation(
                        f"group {group} collective #{seq}: {first.host} entered "
                        f"{first.get('op')}({first.get('nbytes')} B), {ev.host} entered "
                        f"{ev.get('op')}({ev.get('nbytes')} B)",
                        [first, ev],
                    )
                )
                break
    return res


def _groups_in_agreement(hist: History) -> int | None:
    """The number of groups entered, when no two entries of one collective (group, seq)
    differ in op or size: a recorded ``coll_enter`` enters one, a training summary's
    entries (:meth:`~elastic_sim.history.History.entries`) ``seq`` .. ``end - 1``, all
    alike (nothing to compare one by one then). None when two do, or a ``seq`` is not a
    number (each entry is read then)."""
    spans: dict[object, list[tuple[int, int, tuple[object, object]]]] = defaultdict(list)
    for ev in hist.recorded("coll_enter"):
        seq = ev.get("seq")
        if type(seq) is not int:
            return None
        spans[ev.get("group")].append((seq, seq + 1, (ev.get("op"), ev.get("nbytes"))))
    for run in hist.entries() or ():
        spans[run.group].append((run.seq, run.end, (run.op, run.nbytes)))
    for group in spans.values():
        reach: list[tuple[tuple[object, object], int]] = []
        """(op, size), and the end of the collectives entered as such so far (by seq)."""
        for lo, hi, what in sorted(group, key=lambda e: e[0]):
            if any(top > lo for other, top in reach if other != what):
                return None
            reach = [(o, t) for o, t in reach if o != what] + [
                (what, max([hi, *(t for o, t in reach if o == what)]))]
    return len(spans)


def state_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """After a state sync, every member holds the root's state."""
    res = CheckResult("state_agreement", "after a sync every member holds the root's state",
                      unit="syncs")
    for rnd, evs in _by(events, "sync", "round").items():
        res.checked += 1
        root_host = evs[0].get("root")
        root = next((ev for ev in evs if ev.host == root_host), None)
        if root is None:
            continue  # the root died before recording its sync: nothing to compare with
        for ev in evs:
            if ev.get("digest") != root.get("digest") or ev.get("step") != root.get("step"):
                res.violations.append(
                    Violation(
                        f"round {rnd}: {ev.host} holds step {ev.get('step')} digest "
                        f"{ev.get('digest')} but the root {root.host} holds step "
                        f"{root.get('step')} digest {root.get('digest')}",
                        [root, ev],
                    )
                )
    return res


def committed_progress(events: Sequence[TraceEvent]) -> CheckResult:
    """Committed progress never goes backwards, except by a restore to the last commit. A
    host whose first process starts again (a new incarnation) starts with nothing committed:
    its own restore is not judged against the old incarnation's commits (the others' sync to
    what it broadcasts still is). Nothing after the job's first ``job_done`` is judged:
    its result exists (a torchft replica group that still has data to train once the
    others have finished and left starts over with nobody to heal from)."""
    res = CheckResult(
        "committed_progress",
        "committed step never decreases except by a restore to the last commit",
        unit="hosts",
    )
    last: dict[str, TraceEvent] = {}
    started: set[str] = set()
    for ev in neutral(events).of("proc_start", "commit", "restore", "sync", "job_done"):
        if ev.kind == "job_done":
            break
        if ev.kind == "proc_start" and ev.proc == f"{ev.host}/main":
            if ev.host in started:
                last.pop(ev.host, None)  # a new incarnation (crash_restart) holds nothing yet
            started.add(ev.host)
        if ev.kind not in ("commit", "restore", "sync"):
            continue
        prev = last.get(ev.host)
        prev_step = prev.get("step", 0) if prev else 0
        step = ev.get("step", 0)
        if ev.kind == "commit" and prev is not None and step <= prev_step:
            res.violations.append(
                Violation(f"{ev.host} committed step {step} after step {prev_step}", [prev, ev])
            )
        elif ev.kind == "restore" and step != prev_step:
            res.violations.append(
                Violation(f"{ev.host} restored step {step}, but its last commit was step "
                          f"{prev_step}", [prev, ev] if prev else [ev])
            )
        elif ev.kind == "sync" and step < prev_step:
            res.violations.append(
                Violation(f"{ev.host} synced to step {step}, behind its committed step "
                          f"{prev_step}: committed progress lost", [prev, ev] if prev else [ev])
            )
        last[ev.host] = ev
    res.checked = len(last)
    return res


# Checks v2 live in their own modules (one concept each); imported here so that CHECKS is
# the one list of every check.
from elastic_sim.checks.accounting import (  # noqa: E402
    no_pointless_reconfiguration,
    restart_accounting,
)
from elastic_sim.checks.bounded import time_advances, within_run_guards  # noqa: E402
from elastic_sim.checks.hosts import eventual_incorporation, healthy_hosts_kept  # noqa: E402
from elastic_sim.checks.jobend import (  # noqa: E402
    avoidable_job_failure,
    clean_shutdown,
    rendezvous_closed_by_job_end,
)
from elastic_sim.checks.limits import limits  # noqa: E402
from elastic_sim.checks.liveness import (  # noqa: E402
    no_restart_loop,
    progress_after_faults,
    terminates,
)
from elastic_sim.checks.reset_callbacks import reset_callback_state  # noqa: E402
from elastic_sim.checks.rounds import (  # noqa: E402
    epoch_isolation,
    master_agreement,
    members_alive_at_completion,
    one_world_at_a_time,
)
from elastic_sim.checks.torchft_quorum import ft_quorum_ids, ft_quorum_validity  # noqa: E402
from elastic_sim.checks.torchft_steps import (  # noqa: E402
    ft_data_position_agreement,
    ft_fault_isolation,
    ft_group_recovers,
    ft_liveness,
    ft_single_heal_source,
    ft_state_agreement,
    ft_unanimous_commit,
)

CHECKS: tuple[Check, ...] = (
    membership_agreement,
    rank_validity,
    collective_sequence,
    state_agreement,
    committed_progress,
    reset_callback_state,
    members_alive_at_completion,
    master_agreement,
    epoch_isolation,
    one_world_at_a_time,
    limits,
    restart_accounting,
    healthy_hosts_kept,
    rendezvous_closed_by_job_end,
    avoidable_job_failure,
    clean_shutdown,
    no_pointless_reconfiguration,
    terminates,
    progress_after_faults,
    no_restart_loop,
    eventual_incorporation,
    ft_quorum_ids,
    ft_quorum_validity,
    ft_state_agreement,
    ft_data_position_agreement,
    ft_unanimous_commit,
    ft_single_heal_source,
    ft_fault_isolation,
    ft_group_recovers,
    ft_liveness,
    time_advances,
    within_run_guards,
)
"""Every check, safety first, then liveness."""


def run_checks(events: Sequence[TraceEvent], only: Collection[str] | None = None
               ) -> list[CheckResult]:
    """Every check over one trace (one :class:`~elastic_sim.history.History` shared by the
    checks, read once in their protocol-neutral vocabulary), or those named in ``only``;
    violations capped at :data:`MAX_VIOLATIONS` each. Rounds of a restarted coordinator's
    new incarnation are told apart from the old one's
    (:func:`elastic_sim.checks.incarnations.incarnation_rounds`)."""
    from elastic_sim.checks.incarnations import incarnation_rounds

    hist = incarnation_rounds(history(events)).neutral
    out = []
    for check in CHECKS:
        if only is not None and check.__name__ not in only:
            continue
        started = time.perf_counter()
        res = check(hist)
        res.seconds = time.perf_counter() - started
        res.violations = res.violations[:MAX_VIOLATIONS]
        out.append(res)
    return out
