"""Horovod's elastic driver as a small world: 2-4 hosts over the driver's pure decision
functions (``protocols/horovod/hosts.py``: the host order, rank assignment and update
classification; ``registry.py``: the reset barrier's trip decision), in every order of
its decision points (a discovery poll, a worker reaching the barrier, a trip, an epoch, a
worker finishing) with one fault at every point (a worker host crashing, a host leaving
discovery, the first discovery call failing).

Promises checked: the job ends with an error only when too few live hosts are offered
(``avoidable_job_failure``), and a reset never puts a fresh worker, which syncs, beside
survivors told to skip the sync (``collective_sequence``: a removal-only update).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from elastic_sim.exhaustive import Broken, Move
from elastic_sim.protocols.horovod.hosts import classify_update, host_assignments, order_hosts
from elastic_sim.protocols.horovod.registry import WorkerState, decide_trip

EPOCHS = 1
"""Epochs the job trains before its workers finish."""


@dataclass(frozen=True)
class DriverState:
    """What the driver knows and its workers did: the hosts discovery offers, the last
    discovery result it saw (None: before the first poll), the current world (hosts and
    slots in rank order) and each slot's state (``run``, ``READY``, ``SUCCESS``,
    ``FAILURE``), the blacklist, resets, epochs done, whether the workers were told of a
    change, the driver's phase, the dead hosts."""

    offered: frozenset[str]
    seen: tuple[tuple[str, int], ...] | None
    world: tuple[tuple[str, int], ...] = ()
    slots: tuple[tuple[str, int, str], ...] = ()
    blacklisted: frozenset[str] = frozenset()
    resets: int = 0
    epoch: int = 0
    notified: bool = False
    update: str = ""
    phase: str = "start"
    dead: frozenset[str] = frozenset()
    faults: int = 0
    error: bool = False


class DriverWorld:
    """horovodrun's elastic driver on ``hosts`` (``{host: slots}`` as discovery offers them;
    the driver on ``driver``)."""

    def __init__(self, hosts: dict[str, int], driver: str, np: int, min_np: int,
                 max_np: int | None, reset_limit: int | None, max_faults: int = 1) -> None:
        self.hosts = dict(hosts)
        self.driver = driver
        self.np, self.min_np, self.max_np = np, min_np, max_np
        self.reset_limit = reset_limit
        self.max_faults = max_faults

    def initial(self) -> DriverState:
        return DriverState(frozenset(self.hosts), None)

    def moves(self, s: DriverState) -> list[Move]:
        if s.phase.startswith("stopped"):
            return []
        out = []
        if s.phase == "start" or (s.seen is not None and s.offered != {h for h, _ in s.seen}):
            out.append(Move("poll", self.driver))
        running = [(h, i) for h, i, st in s.slots if st == "run"]
        failed = any(st == "FAILURE" for _, _, st in s.slots)
        if s.phase == "running":
            for h, i in running:
                if s.notified or failed:
                    out.append(Move(f"ready {h}:{i}", h))
                elif s.epoch >= EPOCHS:
                    out.append(Move(f"finish {h}:{i}", h))
            if running and not (s.notified or failed) and s.epoch < EPOCHS:
                out.append(Move("progress", self.driver))
            if s.slots and not running:
                out.append(Move("trip", self.driver))
        if s.faults < self.max_faults:
            if s.phase == "start":
                out.append(Move("discovery_error", self.driver, fault=True))
            for h in sorted(self.hosts):
                if h != self.driver and h not in s.dead:
                    out.append(Move(f"crash {h}", h, fault=True))
                if h in s.offered and len(s.offered) > 1:
                    out.append(Move(f"remove {h}", h, fault=True))
        return out

    def after(self, s: DriverState, move: Move) -> tuple[DriverState, list[Broken]]:
        verb, _, arg = move.label.partition(" ")
        if verb == "discovery_error":
            return replace(s, error=True, faults=s.faults + 1), []
        if verb == "crash":
            slots = tuple((h, i, "FAILURE" if h == arg and st in ("run", "READY") else st)
                          for h, i, st in s.slots)
            return replace(s, dead=s.dead | {arg}, slots=slots, faults=s.faults + 1), []
        if verb == "remove":
            return replace(s, offered=s.offered - {arg}, faults=s.faults + 1), []
        if verb == "poll":
            return self._poll(s)
        if verb in ("ready", "finish"):
            h, _, i = arg.partition(":")
            state = "READY" if verb == "ready" else "SUCCESS"
            slots = tuple((x, j, state if (x, j) == (h, int(i)) else st)
                          for x, j, st in s.slots)
            return replace(s, slots=slots), []
        if verb == "progress":
            return replace(s, epoch=s.epoch + 1), []
        return self._trip(s)

    def _offered(self, s: DriverState) -> tuple[tuple[str, int], ...]:
        return tuple((h, self.hosts[h]) for h in sorted(s.offered))

    def _assign(self, s: DriverState, prev: tuple[str, ...], need: int
                ) -> tuple[tuple[str, int], ...] | None:
        """The next world (None: too few slots)."""
        seen = dict(s.seen or ())
        avail = [h for h in seen if h not in s.blacklisted]
        order = order_hosts(list(prev), avail, None)
        try:
            by_host, _ = host_assignments(order, seen, need, self.max_np)
        except ValueError:
            return None
        return tuple((h, len(by_host[h])) for h in order if h in by_host)

    def _spawn(self, s: DriverState, world: tuple[tuple[str, int], ...]
               ) -> tuple[tuple[str, int, str], ...]:
        return tuple((h, i, "FAILURE" if h in s.dead else "run")
                     for h, n in world for i in range(n))

    def _poll(self, s: DriverState) -> tuple[DriverState, list[Broken]]:
        if s.phase == "start":
            if s.error:
                return self._stop(s, "discovery_error")
            s = replace(s, seen=self._offered(s))
            world = self._assign(s, (), self.np)
            if world is None:
                return replace(s, phase="waiting"), []
            return replace(s, world=world, slots=self._spawn(s, world), phase="running"), []
        prev = dict(s.seen or ())
        s = replace(s, seen=self._offered(s))
        res = classify_update(dict(s.seen or ()), prev)
        if s.phase == "waiting":
            world = self._assign(s, tuple(h for h, _ in s.world), self.min_np)
            if world is None:
                return s, []
            return replace(s, world=world, slots=self._spawn(s, world), phase="running"), []
        nxt = self._assign(s, tuple(h for h, _ in s.world), self.min_np)
        if nxt is None or nxt == s.world:
            return s, []
        return replace(s, notified=True, update=res.name or ""), []

    def _trip(self, s: DriverState) -> tuple[DriverState, list[Broken]]:
        states = [((h, i), WorkerState(st)) for h, i, st in s.slots]
        d = decide_trip(states, len(states), s.blacklisted, s.resets, self.reset_limit)
        if d.action == "stop":
            return self._stop(s, d.reason)
        s = replace(s, blacklisted=s.blacklisted | set(d.blacklist), resets=s.resets + 1)
        prev = tuple(h for h, _ in s.world)
        world = self._assign(s, prev, self.min_np)
        if world is None:
            return self._stop(replace(s, phase="waiting"), "timeout")
        if not set(prev) & {h for h, _ in world}:
            return self._stop(s, "no_hosts_remaining")
        broken = []
        fresh = [h for h, _ in world if h not in prev]
        if s.update == "removed" and fresh and set(prev) & {h for h, _ in world}:
            broken.append(Broken("collective_sequence", f"a removal-only update: survivors "
                                 f"skip the sync while fresh workers on {', '.join(fresh)} "
                                 "sync"))
        return replace(s, world=world, slots=self._spawn(s, world), notified=False,
                       update="", phase="running"), broken

    def _stop(self, s: DriverState, reason: str) -> tuple[DriverState, list[Broken]]:
        s = replace(s, phase=f"stopped:{reason}")
        if reason == "success":
            return s, []
        live = sum(n for h, n in self.hosts.items() if h in s.offered and h not in s.dead)
        if live >= self.min_np:
            return s, [Broken("avoidable_job_failure", f"the job stopped ({reason}) with "
                              f"{live} live slots offered, min_np {self.min_np}")]
        return s, []

    def at_rest(self, s: DriverState) -> list[Broken]:
        if s.phase == "waiting":
            return self._stop(s, "timeout")[1]
        return []


__all__ = ["EPOCHS", "DriverState", "DriverWorld"]
