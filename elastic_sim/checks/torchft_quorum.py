"""torchft's quorum checks, over the Lighthouse's issued quorums (``lh_quorum``) and each
rank's view of them (``ft_quorum``): ids that never go back and are new exactly when
upstream's rule makes them new, and quorums that are fast or valid. They read torchft's own
event kinds (the protocol-neutral vocabulary is not in this tree yet); a trace of another
protocol has none of them, and they examine nothing there."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.facts import knobs_of
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import history
from elastic_sim.trace import TraceEvent


def ft_quorum_ids(events: Sequence[TraceEvent]) -> CheckResult:
    """A Lighthouse gives an issued quorum the next id exactly when its member ids differ
    from the previous quorum's or a member reports should_commit failures, and the same id
    otherwise (a Lighthouse started again counts from 0); and the quorum ids a rank
    process sees from one Lighthouse never go back (a new Lighthouse's ids start over, as
    upstream's do)."""
    res = CheckResult("ft_quorum_ids", "quorum ids are new exactly when the members change "
                      "or a member reports commit failures, and never go back for a rank",
                      unit="quorums issued or seen")
    issued: dict[str, TraceEvent] = {}
    """A Lighthouse process -> the last quorum it issued."""
    seen: dict[str, TraceEvent] = {}
    """A rank process -> the last quorum it was given."""
    for ev in history(events).of("proc_start", "lh_start", "lh_quorum", "ft_quorum"):
        if ev.kind == "proc_start":  # a new incarnation starts from scratch
            issued.pop(ev.proc, None)
            seen.pop(ev.proc, None)
        elif ev.kind == "lh_start":  # a Lighthouse started again counts from 0 for all
            seen.clear()
        elif ev.kind == "lh_quorum":
            res.checked += 1
            before = issued.get(ev.proc)
            last = int(before.get("quorum_id")) if before is not None else 0
            changed = before is None or before.get("replica_ids") != ev.get("replica_ids")
            failing = any(int(c) > 0 for c in ev.get("commit_failures", []))
            want = last + 1 if changed or failing else last
            if int(ev.get("quorum_id")) != want:
                why = ("its members changed" if changed else
                       "a member reported commit failures" if failing else
                       "nothing changed")
                res.violations.append(Violation(
                    f"{ev.proc} issued quorum {ev.get('quorum_id')} after {last}, where "
                    f"{why}: upstream gives it id {want}",
                    [e for e in (before, ev) if e is not None]))
            issued[ev.proc] = ev
        else:
            res.checked += 1
            before = seen.get(ev.proc)
            if before is not None and int(ev.get("quorum_id")) < int(before.get("quorum_id")):
                res.violations.append(Violation(
                    f"{ev.proc} was given quorum {ev.get('quorum_id')} after quorum "
                    f"{before.get('quorum_id')}: its quorum id went back", [before, ev]))
            seen[ev.proc] = ev
    return res


def ft_quorum_validity(events: Sequence[TraceEvent]) -> CheckResult:
    """Every quorum the Lighthouse issues is made of healthy participants and is either
    fast (every member of its previous quorum is a healthy participant again) or has at
    least ``min_replicas`` healthy participants, more than half of the replicas
    heartbeating then. (A previous quorum with no members makes the next one fast, as
    upstream's rule reads.)"""
    res = CheckResult("ft_quorum_validity", "every quorum is fast, or has min_replicas "
                      "healthy participants and a strict majority of the heartbeating "
                      "replicas", unit="quorums")
    least = int(knobs_of(events).get("min_replicas", 1))
    issued: dict[str, TraceEvent] = {}
    for ev in history(events).of("proc_start", "lh_quorum"):
        if ev.kind == "proc_start":
            issued.pop(ev.proc, None)
            continue
        res.checked += 1
        ready = set(ev.get("participants", []))
        beating = set(ev.get("heartbeating", []))
        before = issued.get(ev.proc)
        issued[ev.proc] = ev
        stray = [r for r in ev.get("replica_ids", []) if r not in ready]
        if stray:
            res.violations.append(Violation(
                f"quorum {ev.get('quorum_id')} includes {', '.join(stray)}, not a healthy "
                "participant", [ev]))
            continue
        if before is not None and set(before.get("replica_ids", [])) <= ready:
            continue  # fast: the previous members are all back
        if len(ready) < least:
            res.violations.append(Violation(
                f"quorum {ev.get('quorum_id')} has {len(ready)} healthy participants, fewer "
                f"than min_replicas {least}, and is not fast",
                [e for e in (before, ev) if e is not None]))
        elif 2 * len(ready) <= len(beating):
            res.violations.append(Violation(
                f"quorum {ev.get('quorum_id')} has {len(ready)} healthy participants of "
                f"{len(beating)} heartbeating replicas, no strict majority, and is not fast",
                [e for e in (before, ev) if e is not None]))
    return res
