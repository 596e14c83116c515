"""Safety checks about rounds (epochs) and who takes part in them: members alive when their
round completes, one master address per world, and no process of an older round in a newer
round's collective. Pure functions from history to verdict, each violation with its
witnesses."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.facts import Cluster
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.trace import TraceEvent


def _host_of(proc: str) -> str:
    return proc.split("/", 1)[0]


def members_alive_at_completion(events: Sequence[TraceEvent]) -> CheckResult:
    """Every member of a completed round has a live, responsive process on its host when
    the round completes: at its ``rdzv_complete`` (the instant the membership was decided)
    where the protocol records one, else at its first ``rdzv_done`` (which may come later:
    a member that dies in between was alive at completion). A round never admits a host
    that is already gone, nor one frozen by a hang (as good as dead to its peers)."""
    res = CheckResult("members_alive_at_completion",
                      "every member of a completed round is alive and responsive when it "
                      "completes", unit="rounds")
    live: dict[str, int] = {}
    last_exit: dict[str, TraceEvent] = {}
    cluster = Cluster()
    seen_rounds: set[object] = set()
    for ev in events:
        cluster.see(ev)
        if ev.kind == "proc_start":
            live[ev.host] = live.get(ev.host, 0) + 1
        elif ev.kind == "proc_exit":
            live[ev.host] = live.get(ev.host, 0) - 1
            last_exit[ev.host] = ev
        elif ev.kind in ("rdzv_complete", "rdzv_done"):
            rnd = ev.get("round")
            if rnd in seen_rounds:
                continue
            seen_rounds.add(rnd)
            res.checked += 1
            for member in ev.get("members", []):
                host = _host_of(str(member).split(":", 1)[0])
                if host in live and live[host] <= 0:
                    res.violations.append(Violation(
                        f"round {rnd} completed with {host} as a member, but {host} had no "
                        "live process then", [last_exit[host], ev]))
                elif cluster.is_frozen(host):
                    hang = next(e for e in reversed(list(cluster.active.values()))
                                if e.get("target") == host)
                    res.violations.append(Violation(
                        f"round {rnd} completed with {host} as a member, but {host} was "
                        "frozen (hung) then", [hang, ev]))
    return res


def master_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """All members of one round are told the same master address."""
    res = CheckResult("master_agreement", "every worker of one world is told the same master",
                      unit="rounds")
    first: dict[object, TraceEvent] = {}
    for ev in events:
        if ev.kind != "rdzv_done" or ev.get("master") is None:
            continue
        rnd = ev.get("round")
        if rnd not in first:
            first[rnd] = ev
            res.checked += 1
        elif ev.get("master") != first[rnd].get("master"):
            res.violations.append(Violation(
                f"round {rnd}: {first[rnd].host} was told master {first[rnd].get('master')}, "
                f"{ev.host} was told {ev.get('master')}", [first[rnd], ev]))
    return res


def epoch_isolation(events: Sequence[TraceEvent]) -> CheckResult:
    """No process of an older round takes part in a newer round's collective: every member
    entering a group's collectives last completed the same rendezvous round."""
    res = CheckResult("epoch_isolation",
                      "no process of an older round in a newer round's collective",
                      unit="collectives")
    current: dict[str, TraceEvent] = {}
    """Per process: its latest rdzv_done (processes that record none are not judged)."""
    entered: dict[tuple[object, object], tuple[TraceEvent, TraceEvent]] = {}
    """(group, seq) -> the first entry and the round its process was in then."""
    for ev in events:
        if ev.kind == "rdzv_done":
            current[ev.proc] = ev
        elif ev.kind == "coll_enter":
            rd = current.get(ev.proc)
            if rd is None:
                continue
            key = (ev.get("group"), ev.get("seq"))
            first = entered.get(key)
            if first is None:
                entered[key] = (ev, rd)
                res.checked += 1
                continue
            other, ord_ = first
            if ord_.get("round") != rd.get("round"):
                res.violations.append(Violation(
                    f"group {ev.get('group')} collective #{ev.get('seq')}: {other.host} "
                    f"entered it in round {ord_.get('round')}, {ev.host} in round "
                    f"{rd.get('round')}", [ord_, other, rd, ev]))
    return res
