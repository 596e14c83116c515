"""Checks about the hosts a job is offered: once the cluster is quiet every available host
that fits is brought into the world (eventual incorporation), and a host that did not fail
is never blacklisted or evicted, nor does a barrier trip before its distinct parties
arrived."""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.capacity import Capacity, replay
from elastic_sim.checks.facts import host_of, last_quiet_point
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.trace import TraceEvent

WORLD = ("rdzv_done", "hvd_assign")


def _members(ev: TraceEvent) -> list[str]:
    """The distinct hosts of a formed world (rdzv_done members, hvd_assign ranks)."""
    raw = ev.get("members") if ev.kind == "rdzv_done" else list(ev.get("ranks") or {})
    out: list[str] = []
    for m in raw or []:
        h = host_of(str(m))
        if h not in out:
            out.append(h)
    return out


def eventual_incorporation(events: Sequence[TraceEvent]) -> CheckResult:
    """Once the last fault has started or healed, every host that stays available (alive,
    reachable, offered by discovery and not blacklisted for a failure) is in the world
    within the protocol's settle time (its polling and rendezvous periods and start-up
    timeouts, from the knobs), unless the world is already at its maximum. Judged at that
    instant, if the job is still running then."""
    res = CheckResult("eventual_incorporation",
                      "once quiet, every available host that fits joins the world within the "
                      "settle time the knobs imply", unit="hosts")
    quiet = last_quiet_point(events)
    at_quiet: list[str] | None = None
    world: TraceEvent | None = None
    left: set[str] = set()
    judged: tuple[float, Capacity] | None = None
    for ev, cap in replay(events):
        due = quiet + cap.limits.settle_s
        if at_quiet is None and ev.t >= quiet:
            at_quiet = cap.able(ev.t)
        if ev.t > due:
            judged = (due, cap)
            break
        if ev.kind in ("job_done", "job_failed"):
            return res  # the job ended before it could be judged
        if ev.kind in WORLD:
            world = ev
        if ev.kind == "proc_exit" and ev.proc == f"{ev.host}/main":
            left.add(ev.host)
    if judged is None or at_quiet is None:
        return res
    due, cap = judged
    wanted = [h for h in cap.able(due) if h in at_quiet and h not in left]
    members = _members(world) if world is not None else []
    res.checked = len(wanted)
    cap_hosts = cap.limits.max_hosts
    if cap_hosts is not None and len(members) >= cap_hosts:
        return res
    missing = [h for h in wanted if h not in members]
    if missing:
        res.violations.append(Violation(
            f"{cap.limits.settle_s:g} s after the last fault ({quiet:g} s) the world is "
            f"{len(members)} hosts ({', '.join(members) or 'none'}) without "
            f"{', '.join(missing)}, available all along (max "
            f"{cap_hosts if cap_hosts is not None else 'unbounded'})",
            [e for e in (world,) if e is not None]
            + [e for e in events if e.kind == "fault"][-1:]))
    return res


def healthy_hosts_kept(events: Sequence[TraceEvent]) -> CheckResult:
    """A host that did not fail (no fault hit it, no scripted failure of its workers) is
    never blacklisted or evicted; an exit barrier trips only once as many distinct hosts
    as its round's world size entered it."""
    res = CheckResult("healthy_hosts_kept",
                      "no healthy host blacklisted; barriers trip only when their distinct "
                      "parties arrived", unit="blacklistings and barriers")
    entered: dict[object, dict[str, TraceEvent]] = {}
    tripped: set[object] = set()
    for ev, cap in replay(events):
        if ev.kind == "hvd_blacklist":
            res.checked += 1
            target = str(ev.get("target"))
            if target not in cap.cluster.faulted:
                res.violations.append(Violation(
                    f"{target} was blacklisted at {ev.t:g} s though no fault hit it and none "
                    "of its workers was made to fail", [ev]))
        elif ev.kind == "exit_barrier_enter":
            entered.setdefault(ev.get("round"), {}).setdefault(ev.host, ev)
        elif ev.kind == "exit_barrier_done" and ev.get("round") not in tripped:
            rnd = ev.get("round")
            tripped.add(rnd)
            res.checked += 1
            parties = entered.get(rnd, {})
            size = next((e.get("world_size") for e in parties.values()), None)
            if isinstance(size, int) and len(parties) < size:
                res.violations.append(Violation(
                    f"the exit barrier of round {rnd} tripped with {len(parties)} of its "
                    f"{size} hosts in it ({', '.join(sorted(parties))})",
                    [*parties.values(), ev]))
    return res
