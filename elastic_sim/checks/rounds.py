"""Safety checks about rounds (epochs) and who takes part in them: members alive when their
round completes, one master address per world, no process of an older round in a newer
round's collective, and one world training at a time. Pure functions from history to
verdict, each violation with its witnesses."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.facts import Cluster
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import Entries, History, Key, neutral
from elastic_sim.trace import TraceEvent


def _host_of(proc: str) -> str:
    return proc.split("/", 1)[0]


def members_alive_at_completion(events: Sequence[TraceEvent]) -> CheckResult:
    """Every member of a completed round has a live, responsive process on its host when
    the round completes: at its ``epoch_decided`` (the instant the membership was decided)
    where the protocol records one, else at its first ``rdzv_done`` (which may come later:
    a member that dies in between was alive at completion). A round never admits a host
    that is already gone, nor one frozen by a hang (as good as dead to its peers).

    A host's live processes are those whose ``proc_start`` came and whose ``proc_exit`` has
    not. An exit without a start takes none away: a real worker killed while it was still
    importing, before it could record its own start, leaves only its parent's record of
    the exit (its host's agent lives on)."""
    res = CheckResult("members_alive_at_completion",
                      "every member of a completed round is alive and responsive when it "
                      "completes", unit="rounds")
    live: dict[str, int] = {}
    running: dict[str, int] = {}
    """Per process name: starts not yet matched by an exit."""
    last_exit: dict[str, TraceEvent] = {}
    cluster = Cluster()
    seen_rounds: set[object] = set()
    for ev in neutral(events).plain:  # it reads no summarised kind
        cluster.see(ev)
        if ev.kind == "proc_start":
            live[ev.host] = live.get(ev.host, 0) + 1
            running[ev.proc] = running.get(ev.proc, 0) + 1
        elif ev.kind == "proc_exit":
            last_exit[ev.host] = ev
            live.setdefault(ev.host, 0)
            if running.get(ev.proc, 0) > 0:
                running[ev.proc] -= 1
                live[ev.host] -= 1
        elif ev.kind in ("epoch_decided", "rdzv_done"):
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
                    # the hang that froze it (none in a hand-written trace whose fault
                    # ids repeat: another fault's end closed the id): the round alone
                    hang = next((e for e in reversed(list(cluster.active.values()))
                                 if e.get("target") == host), None)
                    res.violations.append(Violation(
                        f"round {rnd} completed with {host} as a member, but {host} was "
                        "frozen (hung) then", [ev] if hang is None else [hang, ev]))
    return res


def master_agreement(events: Sequence[TraceEvent]) -> CheckResult:
    """All members of one round are told the same master address."""
    res = CheckResult("master_agreement", "every worker of one world is told the same master",
                      unit="rounds")
    first: dict[object, TraceEvent] = {}
    for ev in neutral(events).of("rdzv_done"):
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
    hist = neutral(events)
    runs = hist.entries(whole=True)
    if runs and _isolated_in_one_round(hist, runs, res):
        return res
    current: dict[str, TraceEvent] = {}
    """Per process: its latest rdzv_done (processes that record none are not judged)."""
    entered: dict[tuple[object, object], tuple[TraceEvent, TraceEvent]] = {}
    """(group, seq) -> the first entry and the round its process was in then."""
    for ev in hist.of("rdzv_done", "coll_enter"):
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


def _isolated_in_one_round(hist: History, runs: list[Entries], res: CheckResult) -> bool:
    """:func:`epoch_isolation` read by runs rather than by step (``runs``: the entries of
    training summaries, each made by one process in one round): when every entry of each
    group (a recorded ``coll_enter``, or a run's) came from the same round, none is
    isolated from another and the count is that of the distinct collectives entered.
    Counted into ``res``; False (``res`` untouched) when that is not so, to read the
    entries one by one."""
    items: list[tuple[Key, TraceEvent | Entries]] = [
        *hist.keyed("rdzv_done", "coll_enter"), *((run.key, run) for run in runs)]
    items.sort(key=lambda p: p[0])
    current: dict[str, TraceEvent] = {}
    rounds: dict[object, object] = {}
    seqs: dict[object, list[tuple[int, int]]] = {}
    for _, item in items:
        if isinstance(item, Entries):
            proc, group, lo, hi = item.proc, item.group, item.seq, item.end
        elif item.kind == "rdzv_done":
            current[item.proc] = item
            continue
        else:
            proc, group, seq = item.proc, item.get("group"), item.get("seq")
            if type(seq) is not int:
                return False
            lo, hi = seq, seq + 1
        rd = current.get(proc)
        if rd is None:
            continue
        rnd = rd.get("round")
        if group in rounds and rounds[group] != rnd:
            return False
        rounds.setdefault(group, rnd)
        seqs.setdefault(group, []).append((lo, hi))
    for spans in seqs.values():
        reach: int | None = None
        for lo, hi in sorted(spans):
            start = lo if reach is None else max(lo, reach)
            res.checked += max(0, hi - start)
            reach = hi if reach is None else max(reach, hi)
    return True


def one_world_at_a_time(events: Sequence[TraceEvent]) -> CheckResult:
    """At most one world trains at a time: no two worlds without a member in common record
    steps over overlapping spans of time. Two such worlds are two jobs (a split brain):
    each trains the same steps on its own state, and the work of one is lost. A world is a
    round's membership (its ``rdzv_done``); a host's steps count for the round it last
    completed, and a world's span runs from its first step to its last."""
    res = CheckResult("one_world_at_a_time",
                      "no two worlds without a common member train at the same time",
                      unit="worlds")
    world_of: dict[str, object] = {}
    formed: dict[object, TraceEvent] = {}
    """Round -> its first ``rdzv_done`` (its membership)."""
    spans: dict[object, list[TraceEvent]] = {}
    """Round -> [its first step, its last step]."""
    for ev in neutral(events).of("rdzv_done", "step"):
        if ev.kind == "rdzv_done":
            world_of[ev.host] = ev.get("round")
            formed.setdefault(ev.get("round"), ev)
            continue
        rnd = world_of.get(ev.host)
        if rnd is None:
            continue
        span = spans.get(rnd)
        if span is None:
            spans[rnd] = [ev, ev]
        else:
            span[1] = ev
    res.checked = len(spans)
    order = sorted(spans.items(), key=lambda item: item[1][0].t)
    live: list[tuple[object, list[TraceEvent]]] = []
    """The worlds (in order of their first step) whose last step is after the first step
    of the world under consideration."""
    for rnd, (first, last) in order:
        live = [(r, s) for r, s in live if s[1].t > first.t]
        mine = {str(m) for m in formed[rnd].get("members", [])}
        for other, (o_first, o_last) in live:
            theirs = {str(m) for m in formed[other].get("members", [])}
            if mine & theirs:
                continue
            res.violations.append(Violation(
                f"round {other} ({', '.join(sorted(theirs))}) and round {rnd} "
                f"({', '.join(sorted(mine))}) trained at the same time with no member in "
                f"common: round {other} stepped from {o_first.t:g} s to {o_last.t:g} s, round "
                f"{rnd} from {first.t:g} s (two jobs: a split brain)",
                [formed[other], formed[rnd], first, o_last]))
            return res
        live.append((rnd, [first, last]))
    return res
