"""Checks about the hosts a job is offered: once the cluster is quiet every available host
that fits is brought into the world (eventual incorporation), and a host that did not fail
is never evicted (blacklisted) or left out of a world, nor does a barrier trip before its
distinct parties arrived."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from elastic_sim.checks.capacity import WORLD, Capacity, replay
from elastic_sim.checks.capacity import members as _members
from elastic_sim.checks.facts import last_quiet_point
from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import History, Key, neutral
from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import amended

AVAILABILITY = ("run_start", "proc_start", "proc_exit", "fault", "offered", "evict",
                "epoch_assigned", "injected_failure", "restarts_left", "restart")
"""Events that can change which hosts are available (what the capacity facts read)."""


def eventual_incorporation(events: Sequence[TraceEvent]) -> CheckResult:
    """Every host that is available (alive, reachable, offered by discovery and not
    blacklisted for a failure) from the later of the last fault's start or heal and its own
    arrival (or from when it is available again, if it was not since; with a discovery,
    from when one first offers it), and stays so, is in the world within the protocol's
    settle time (its polling and rendezvous periods and its process-group timeout, from the
    knobs), unless the world is at its maximum then. Each host is judged at that instant, if
    the job still runs and no link fault is in force then (the settle time assumes the
    network's own latency: a slowed or lossy link lengthens every round)."""
    res = CheckResult("eventual_incorporation",
                      "once quiet, every available host that fits joins the world within the "
                      "settle time the knobs imply", unit="hosts")
    hist = neutral(events)
    quiet = last_quiet_point(hist)
    arrived: dict[str, float] = {}
    for ev in hist.of("proc_start"):
        if ev.kind == "proc_start" and ev.proc == f"{ev.host}/main":
            arrived[ev.host] = ev.t
    since: dict[str, float] = {}
    """Host -> when it became available for good (dropped when it stops being)."""
    due: list[tuple[float, str, float, Key]] = []
    """Heap of (judgement time, host, available since, key of the event that set it)."""
    world: TraceEvent | None = None
    blocked: dict[str, float] = {}
    """Host -> when it was last seen not available."""

    slowed: list[str] = []
    """Hosts that came due while a link fault slowed the network."""

    def judge(cap: Capacity) -> None:
        at, host, start, _ = heapq.heappop(due)
        if since.get(host) == start:  # still available all along
            del since[host]
            arrived.pop(host, None)  # judged once
            if any(f.get("type") == "link" for f in cap.cluster.active.values()):
                slowed.append(host)  # the settle time assumes the network's own latency
                return
            res.checked += 1
            _judge(res, host, (start, at - start), world, cap.limits.max_hosts, hist)

    cap: Capacity | None = None
    for (ev, cap), key in zip(replay(hist), hist.keys, strict=False):
        while due and _judged_before(hist, due[0], key):
            judge(cap)  # a training step past the judgement time came first
        if ev.kind in ("job_done", "job_failed"):
            break  # the job ended: hosts not yet due are not judged
        while due and due[0][0] < ev.t:
            judge(cap)
        if ev.kind in AVAILABILITY:  # the quiet point and every arrival are among them
            # with a discovery, a host waits to be taken only once one has offered it
            unoffered = cap.limits.discovered and cap.offered is None
            able = set() if unoffered else set(cap.able(ev.t))
            for host in sorted(arrived):
                begin = max(quiet, arrived[host])
                if host in able and ev.t >= begin:
                    if host not in since:
                        # available from its begin, or, if it was seen unavailable since
                        # then (not offered yet, say), from now
                        start = ev.t if blocked.get(host, -1.0) >= begin else begin
                        since[host] = start
                        heapq.heappush(due, (start + cap.limits.settle_s, host, start, key))
                else:
                    since.pop(host, None)
                    if host not in able:
                        blocked[host] = ev.t
        if ev.kind in WORLD:
            if world is not None and _round(world) == _round(ev):
                united = dict.fromkeys(_members(world))  # in order, one each
                united.update(dict.fromkeys(_members(ev)))
                ev = amended(ev, members=list(united))
            world = ev
    else:
        while cap is not None and due and _judged_before(hist, due[0], None):
            judge(cap)
    if slowed and not res.checked:
        res.not_judged = (f"{', '.join(slowed)} came due while a link fault slowed the "
                          "network: the knobs' settle time assumes its own latency")
    return res


def _judged_before(hist: History, due: tuple[float, str, float, Key], key: Key | None) -> bool:
    """Whether an event after the one that set ``due``, past its judgement time, comes
    before ``key`` (None: the end): a training step between two recorded events."""
    at, _, _, pushed = due
    nxt = hist.next_after(max(pushed, (at, len(hist.raw), 0)))
    return nxt is not None and (key is None or nxt[0] < key)


def _round(ev: TraceEvent) -> object:
    return (ev.kind, ev.get("round"))


def _judge(res: CheckResult, host: str, window: tuple[float, float],
           world: TraceEvent | None, max_hosts: int | None,
           events: Sequence[TraceEvent]) -> None:
    """One host, available from ``window[0]``, must be a member ``window[1]`` s later."""
    members = _members(world) if world is not None else []
    if host in members or (max_hosts is not None and len(members) >= max_hosts):
        return
    start, settle = window
    res.violations.append(Violation(
        f"{host} was available from {start:g} s on, but {settle:g} s later "
        f"({start + settle:g} s) the world is {len(members)} hosts "
        f"({', '.join(members) or 'none'}) without it (max "
        f"{max_hosts if max_hosts is not None else 'unbounded'})",
        [e for e in (world,) if e is not None] + neutral(events).of("fault")[-1:]))


def healthy_hosts_kept(events: Sequence[TraceEvent]) -> CheckResult:
    """A host that did not fail (no fault hit it, no injected failure of its workers) is
    never evicted (blacklisted), nor left out of the next world it asked to join while it
    could go on and the world had room; a barrier ending an epoch trips only once as many
    distinct parties as it waits for entered it."""
    res = CheckResult("healthy_hosts_kept",
                      "no healthy host blacklisted or evicted; barriers trip only when their "
                      "distinct parties arrived",
                      unit="reconfigurations, blacklistings and barriers")
    hist = neutral(events)
    barriers = _Barriers(res, _clock_uncertainty(hist))
    last_world: TraceEvent | None = None
    joined: dict[str, float] = {}
    for ev, cap in replay(hist):
        barriers.settle(ev.t)
        if ev.kind == "rdzv_join":
            joined[ev.host] = ev.t
        if ev.kind in WORLD:
            barriers.world(ev)
        if ev.kind in WORLD and (last_world is None or _round(ev) != _round(last_world)):
            if last_world is not None and last_world.kind == ev.kind:
                res.checked += 1
                asked = {h for h, t in joined.items() if last_world.t < t <= ev.t}
                _evictions(res, last_world, ev, cap, asked)
            last_world = ev
        if ev.kind == "evict":
            res.checked += 1
            target = str(ev.get("host"))
            if target not in cap.cluster.faulted:
                res.violations.append(Violation(
                    f"{target} was blacklisted at {ev.t:g} s though no fault hit it and none "
                    "of its workers was made to fail", [ev]))
        elif ev.kind == "barrier_enter":
            barriers.enter(ev)
        elif ev.kind == "barrier_trip":
            barriers.done(ev)
    barriers.settle(math.inf)
    return res


def _evictions(res: CheckResult, before: TraceEvent, after: TraceEvent, cap: Capacity,
               asked: set[str]) -> None:
    """Members of the previous world that asked to join the next one before it formed,
    left out of it though they never failed, are usable, and it is below its maximum."""
    members = _members(after)
    if cap.limits.max_hosts is not None and len(members) >= cap.limits.max_hosts:
        return
    usable = set(cap.able(after.t))
    for host in _members(before):
        if (host not in members and host in asked and host in usable
                and host not in cap.cluster.faulted):
            res.violations.append(Violation(
                f"{host} was left out of the world formed at {after.t:g} s though it had "
                "asked to join, never failed and could go on", [before, after]))


def _clock_uncertainty(events: Sequence[TraceEvent]) -> dict[str, float]:
    """Each host's clock uncertainty, in seconds, where a real cluster run measured one
    (``clock_sync``); none in the sim or on one machine, where the trace's order is the
    order things happened in."""
    out: dict[str, float] = {}
    for ev in neutral(events).plain:  # (not the expanded view: it need not be made)
        if ev.kind == "clock_sync":
            for host in ev.get("hosts") or []:
                out[str(host)] = float(ev.get("uncertainty") or 0.0)
        elif ev.kind != "run_start":
            break  # clock_sync events come first, before anything runs
    return out


class _Barrier:
    """A round's barrier, once it tripped: the parties in it when it did."""

    def __init__(self, done: TraceEvent, parties: dict[str, TraceEvent],
                 twice: list[TraceEvent], until: float) -> None:
        self.done = done
        self.parties = dict(parties)
        self.twice = list(twice)
        """Entries of a party already in it (a party counted twice)."""
        self.until = until
        """Until when an entry stamped later may still have come first (clock uncertainty)."""


class _Barriers:
    """The barriers of a run (one ending an epoch, a coordinator's reset barrier): a barrier
    trips only once as many distinct parties as it waits for entered it. Its parties are
    the entries before its first ``barrier_trip`` in the trace (in a real cluster run, also
    an entry stamped after it by no more than the two hosts' clock uncertainties together:
    their true order is unknown then), or those the trip itself names (a coordinator that
    keeps the barrier records whom it counted); it waits for as many as its entries say,
    or else as the round's world has members."""

    def __init__(self, res: CheckResult, uncertainty: dict[str, float]) -> None:
        self.res = res
        self.u = uncertainty
        self.most = max(uncertainty.values(), default=0.0)
        self.entered: dict[object, dict[str, TraceEvent]] = {}
        self.twice: dict[object, list[TraceEvent]] = {}
        self.open: dict[object, _Barrier] = {}
        self.judged: set[object] = set()
        self.worlds: dict[object, TraceEvent] = {}
        """Round -> the event that formed its world (a coordinator's assignment first)."""

    def world(self, ev: TraceEvent) -> None:
        """A round's world formed."""
        rnd = ev.get("round")
        if ev.kind == "epoch_assigned" or rnd not in self.worlds:
            self.worlds[rnd] = ev

    def enter(self, ev: TraceEvent) -> None:
        """A party entered a round's barrier."""
        rnd, party = ev.get("round"), str(ev.get("party"))
        mine = self.entered.setdefault(rnd, {})
        if party in mine and rnd not in self.judged and rnd not in self.open:
            self.twice.setdefault(rnd, []).append(ev)
        mine.setdefault(party, ev)
        b = self.open.get(rnd)
        if b is not None and ev.t <= b.done.t + self.u.get(ev.host, 0.0) + \
                self.u.get(b.done.host, 0.0):
            b.parties.setdefault(party, ev)

    def done(self, ev: TraceEvent) -> None:
        """A member left a round's barrier: the first one is when it tripped."""
        rnd = ev.get("round")
        if rnd in self.judged or rnd in self.open:
            return
        named = ev.get("entered")
        parties = (dict.fromkeys((str(p) for p in named), ev) if isinstance(named, list)
                   else self.entered.get(rnd, {}))
        b = _Barrier(ev, parties, self.twice.get(rnd, []),
                     ev.t + self.most + self.u.get(ev.host, 0.0))
        if b.until <= ev.t:  # no clock uncertainty: judged at once, on the trace's order
            self._judge(rnd, b)
        else:
            self.open[rnd] = b

    def settle(self, now: float) -> None:
        """Judge the barriers that no later entry can join any more (``now``: the time the
        trace has reached; inf at its end)."""
        for rnd in [r for r, b in self.open.items() if b.until < now]:
            self._judge(rnd, self.open.pop(rnd))

    def _judge(self, rnd: object, b: _Barrier) -> None:
        self.judged.add(rnd)
        self.res.checked += 1
        parties = b.parties
        entries = [e for e in parties.values() if e is not b.done]
        size = next((e.get("parties") for e in entries), None)
        world = self.worlds.get(rnd)
        if not isinstance(size, int) and world is not None:
            size = len(_parties(world))  # the barrier waits for the world's every member
        if not isinstance(size, int) or len(parties) >= size:
            return
        missing = sorted(set(_parties(world)) - set(parties)) if world is not None else []
        twice = sorted({str(e.get("party")) for e in b.twice})
        first = [e for e in (self.entered.get(rnd, {}).get(p) for p in twice)
                 if e is not None and e not in entries]  # each duplicate's first entry
        self.res.violations.append(Violation(
            f"the barrier of round {rnd} tripped with {len(parties)} of its {size} parties "
            f"in it ({', '.join(sorted(parties))})"
            + (f"; {', '.join(twice)} counted twice" if twice else "")
            + (f"; not in it: {', '.join(missing)}" if missing else ""),
            [*entries, *first, *b.twice] + ([] if entries or world is None else [world])
            + [b.done]))


def _parties(world: TraceEvent) -> list[str]:
    """A world's parties: its members as a coordinator's assignment names them (a slot per
    rank), else its hosts."""
    ranks = world.get("ranks")
    return [str(m) for m in ranks] if isinstance(ranks, dict) else _members(world)
