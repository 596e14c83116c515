"""The elastic driver (horovodrun's ElasticDriver, HostManager and rendezvous handler).

One process holds the discovery loop (under ``wait_hosts_cond`` for the whole tick,
notification included), the host states, the assignments, the worker-state registry, the
rank-and-size service and the Gloo rendezvous store. Workers run on their hosts, started by
that host's task service on the driver's request (the ssh hop); their exits come back as
messages, which stand for the spawner thread's blocking wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import (
    Future,
    Message,
    OperationTimeout,
    Runtime,
    Task,
    yield_point,
)
from elastic_sim.protocols.horovod.conn import (
    Client,
    ConnectFailed,
    ConnectRefused,
    Server,
)
from elastic_sim.protocols.horovod.discovery import DiscoveryError, DiscoverySource, Probe
from elastic_sim.protocols.horovod.hosts import (
    INVALID_SLOT,
    HostState,
    HostUpdateResult,
    SlotInfo,
    blacklist,
    classify_update,
    host_assignments,
    is_excluded,
    is_resurrected,
    order_hosts,
    parse_host_slots,
    whitelist,
)
from elastic_sim.protocols.horovod.registry import WorkerState, WorkerStateRegistry
from elastic_sim.protocols.horovod.settings import HorovodKnobs
from elastic_sim.protocols.horovod.ssh import SshHop
from elastic_sim.protocols.sync import Condition, Event, Lock

NON_ZERO_EXIT_MESSAGE = "Horovod detected that one or more processes exited with non-zero status"
SHUTDOWN_MESSAGE = "Job has been shutdown, see above error messages for details."
FIXED_HOSTS_MESSAGE = "Cannot run in fault tolerance mode with fewer than 2 hosts."
"""launch's error for ``-H`` (fixed hosts) naming fewer than two hosts."""
LONG_HOLD = 1.0
"""A hold of ``wait_hosts_cond`` at least this long is traced (``hvd_lock_held``)."""
FOREVER = 1e12
"""A hang without an end (the run's time limit ends it first)."""


class SlotsTimeout(TimeoutError):
    """``wait_for_available_slots`` ran past the elastic timeout."""


class ElasticDriver(SshHop):
    """The driver of one job (see the module docstring)."""

    def __init__(self, rt: Runtime, knobs: HorovodKnobs, service_of: Mapping[str, str],
                 client: Client, server: Server) -> None:
        self.rt = rt
        self.client = client
        """The ssh clients' connections (spawn, then the exit status) to task services."""
        self.server = server
        """The rank-and-size service's HTTP connections from workers."""
        self.k = knobs
        self.min_np = knobs.min_np if knobs.min_np is not None else knobs.np
        self.max_np = knobs.max_np
        self.service_of = dict(service_of)
        """host -> address of its task service (the ``main`` process of that host)."""
        self.wait_hosts_cond = Condition(rt, Lock(rt, "wait_hosts_cond"))
        self.shutdown = Event(rt)
        self.registry = WorkerStateRegistry(rt, self, knobs.reset_limit)
        self.rng = rt.rng
        self.source = DiscoverySource(knobs.discovery, knobs.slots_per_host,
                                      rt.rng)
        self.host_slots: dict[str, int] = {}
        self.host_order: list[str] = []
        self.host_states: dict[str, HostState] = {}
        self.host_assignments: dict[str, list[SlotInfo]] = {}
        self.rank_assignments: dict[int, SlotInfo] = {}
        self.world_size = 0
        self.worker_clients: dict[tuple[str, int], str] = {}
        self.results: dict[str, tuple[int, float]] = {}
        self.error_message: str | None = None
        self.spawners: list[Task[None]] = []
        self._exits: dict[int, tuple[str, Future[tuple[int, float]]]] = {}
        """Spawners waiting for their ssh client: sid -> (host, its exit code and time)."""
        self._next_id = 0
        self.silent_hosts: set[str] = set()
        """Hosts whose last ssh session ended without a word from them (a connect or
        keepalive that timed out, or killed on this side): likely down, not waited for at
        the end."""
        self.polls = 0
        self.epochs_logged = 0
        self.discovery_task: Task[None] | None = None

    # -- clocks ------------------------------------------------------------------------

    def wall(self) -> float:
        """Wall-clock seconds (``time.time()``) on the driver's host."""
        return self.k.wall_clock_base + self.rt.now()

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- host manager ------------------------------------------------------------------

    def _state(self, host: str) -> HostState:
        return self.host_states.setdefault(host, HostState())

    def is_blacklisted(self, host: str) -> bool:
        """The host's blacklist flag (set by the barrier action, cleared on resurrection)."""
        return self._state(host).blacklisted

    def blacklist(self, host: str) -> None:
        """Blacklist ``host``; unless it was cooling down already, kill its processes."""
        hs, kill = blacklist(self._state(host), self.wall(), self.k.cooldown_range,
                             self.rng.random())
        self.host_states[host] = hs
        until = hs.cooldown_end - self.k.wall_clock_base if hs.cooldown_end else None
        self.rt.record("hvd_blacklist", target=host, cooldown_end=until, kill=kill)
        if kill:
            self._kill(host)

    def update_available_hosts(self) -> HostUpdateResult:
        """Run discovery once; adopt and classify the change, if any."""
        prev_slots, prev_order = self.host_slots, self.host_order
        probe = Probe(self.polls, self.rt.now(), self.epochs_logged)
        slots = self.source.find_available_hosts_and_slots(probe, self.rt.discovery_overlay())
        now = self.wall()
        back = [h for h in slots if is_resurrected(self._state(h), now)]
        if prev_slots == slots and not back:
            return HostUpdateResult.no_update
        avail = [h for h in slots if not is_excluded(self._state(h), now)]
        rng = self.rng if self.k.new_host_order == "random" else None
        self.host_order = order_hosts(prev_order, avail, rng)
        self.host_slots = slots
        res = classify_update(slots, prev_slots, back)
        for h in back:
            self.host_states[h] = whitelist(self._state(h))
        return res

    def current_hosts(self) -> tuple[list[str], dict[str, int]]:
        """Available hosts in order (blacklisted ones dropped in place) and their slots."""
        self.host_order = [h for h in self.host_order if not self.is_blacklisted(h)]
        return list(self.host_order), dict(self.host_slots)

    def _count_slots(self, order: list[str], slots: Mapping[str, int]) -> int:
        return sum(slots[h] for h in order)

    # -- discovery loop ----------------------------------------------------------------

    async def discovery_loop(self) -> None:
        """Tick: run the script, adopt changes, notify rank 0, wake slot waiters; sleep."""
        first = True
        while not self.shutdown.is_set():
            await self.wait_hosts_cond.lock.acquire("discovery")
            try:
                self.polls += 1
                await self._run_script_time()
                res = self.update_available_hosts()
                if res != HostUpdateResult.no_update:
                    order, slots = self.current_hosts()
                    self.rt.record("hvd_discovery", poll=self.polls, update=res.name or "",
                                   hosts=[f"{h}:{slots[h]}" for h in order])
                    # the worker-exit and rendezvous threads, which read the hosts without
                    # this lock, may run between the update and the notification
                    await yield_point(self.rt, "horovod/runner/elastic/driver.py "
                                      "_discover_hosts: update_available_hosts() -> "
                                      "_notify_workers_host_changes()")
                    await self._notify_workers_host_changes(res)
                    self.wait_hosts_cond.notify_all()
            except DiscoveryError as exc:
                self.rt.record("hvd_discovery_error", poll=self.polls, error=str(exc),
                               first=first)
                if first:  # the thread dies; the launcher sees only the shutdown
                    self.shutdown.set()
                    self.wait_hosts_cond.notify_all()
                    return
            finally:
                self._release_wait_hosts()
            first = False
            try:
                await self.shutdown.wait(self.k.discovery_period)
            except OperationTimeout:
                pass

    async def _run_script_time(self) -> None:
        hang = self.rt.discovery_overlay().hang_s  # a discovery_hang fault: wait it out
        if hang > 0:
            await self.rt.sleep(hang)
        spec = self.k.discovery
        if spec.script_time > 0:
            await self.rt.sleep(spec.script_time)
        failure = self.source.failure(self.polls)
        if failure is not None and failure.mode == "hang":
            await self.rt.sleep(FOREVER if failure.hang_s is None else failure.hang_s)

    async def _notify_workers_host_changes(self, res: HostUpdateResult) -> None:
        order, slots = self.current_hosts()
        nxt: dict[str, list[SlotInfo]] = {}
        if self._count_slots(order, slots) >= self.min_np:
            nxt, _ = host_assignments(order, slots, self.min_np, self.max_np)
        if nxt == self.host_assignments:
            return
        coord = self.rank_assignments.get(0)
        if coord is None:
            return
        addr = self.worker_clients.get((coord.hostname, coord.local_rank))
        if addr is None:
            return
        ts = int(self.wall())
        self.rt.record("hvd_notify", to=addr, timestamp=ts, update=res.name or "")
        # BasicClient._send_one: up to `attempts` connects, each a fresh TCP connection to
        # the worker's notification service through its host: refused at once (an RST)
        # once the process is gone, the SYN retransmitted (1, 2, 4, ... s) through a cut,
        # failed when the OS gives up (`notification_timeout`); the next attempt follows
        # at once. The ack read has no timeout upstream; here an attempt ends after
        # `notification_timeout` in all (a stopped or silent recipient).
        error = "timeout"
        for _ in range(self.k.notification_attempts):
            cid = self.client.open(self.service_of[coord.hostname], {
                "kind": "hosts_updated", "to": addr, "timestamp": ts, "update": int(res)},
                port=addr)
            try:
                await self.rt.wait_for(self._notify_once(cid, self.service_of[coord.hostname]),
                                       self.k.notification_timeout)
                return
            except ConnectRefused:
                error = "refused"
            except (ConnectFailed, OperationTimeout):
                error = "timeout"
            finally:
                self.client.close(cid)
        self.rt.record("hvd_notify_failed", to=addr, timestamp=ts, error=error)

    async def _notify_once(self, cid: int, dst: str) -> None:
        await self.client.connect(cid)
        await self.client.reply(cid, dst)

    # -- waiting for slots, assigning, spawning ----------------------------------------

    async def wait_for_available_slots(
        self, min_np: int, min_hosts: int = 1
    ) -> tuple[list[str], dict[str, int]]:
        """Block (up to the elastic timeout) until ``min_np`` slots on ``min_hosts`` hosts."""
        # upstream's Timeout reads the wall clock (time.time()): a clock step moves the
        # deadline, while each wait on the condition runs on the monotonic clock
        deadline = self.wall() + self.k.elastic_timeout
        await self.wait_hosts_cond.lock.acquire("wait_for_available_slots")
        try:
            while True:
                order, slots = self.current_hosts()
                if self._count_slots(order, slots) >= min_np and len(order) >= min_hosts:
                    return order, slots
                if self.shutdown.is_set():
                    raise RuntimeError(SHUTDOWN_MESSAGE)
                await self.wait_hosts_cond.wait(max(0.0, deadline - self.wall()))
                if self.wall() >= deadline:
                    raise SlotsTimeout(
                        "Timed out waiting for minimum number of slots to become available. "
                        f"Please check that you have enough resources to run at least {min_np} "
                        "Horovod processes.")
        finally:
            self._release_wait_hosts()

    def _release_wait_hosts(self) -> None:
        """Release ``wait_hosts_cond``, tracing holds long enough to stall the driver."""
        lock = self.wait_hosts_cond.lock
        held = self.rt.monotonic() - (lock.held_since or 0.0)
        if held >= LONG_HOLD:
            self.rt.record("hvd_lock_held", lock="wait_hosts_cond", owner=lock.owner,
                           held_s=round(held, 6))
        lock.release()

    async def activate_workers(self, n: int) -> None:
        """Wait for ``n`` slots, reassign, reset the barrier, spawn the new slots."""
        order, slots = await self.wait_for_available_slots(n)
        await yield_point(self.rt, "horovod/runner/elastic/driver.py _activate_workers: "
                          "wait_for_available_slots() -> _update_host_assignments()")
        pending = await self._update_host_assignments(order, slots)
        await self.registry.reset(self.world_size)
        rid = self.registry.rendezvous_id
        self.rt.record("hvd_assign", rendezvous=rid, world_size=self.world_size,
                       ranks={f"{s.hostname}:{s.local_rank}": s.rank
                              for s in sorted(self.rank_assignments.values(),
                                              key=lambda s: s.rank)},
                       spawn=[f"{s.hostname}:{s.local_rank}" for s in pending])
        for s in pending:
            self._start_worker_process(s, rid)

    async def resume(self) -> None:
        """The barrier action's reset: activate with min_np."""
        await self.activate_workers(self.min_np)

    async def _update_host_assignments(
        self, order: list[str], slots: dict[str, int]
    ) -> list[SlotInfo]:
        active = {(h, s.local_rank) for h, ss in self.host_assignments.items() for s in ss}
        new, ranked = host_assignments(order, slots, self.min_np, self.max_np)
        if self.host_assignments and not set(self.host_assignments) & set(new):
            raise RuntimeError("No hosts from previous set remaining, unable to broadcast state.")
        self.host_assignments = new
        self.world_size = len(ranked)
        # rendezvous.init(): the discovery thread, which reads both assignments without a
        # lock, may see the new hosts with the old coordinator (rank 0) in between
        await yield_point(self.rt, "horovod/runner/elastic/driver.py _update_host_assignments: "
                          "self._host_assignments = ... -> self._rank_assignments = ...")
        self.rank_assignments = {s.rank: s for s in ranked}
        return [s for h, ss in new.items() for s in ss if (h, s.local_rank) not in active]

    def members(self) -> list[str]:
        """The host of every rank of the current world, in rank order (for the trace)."""
        return [self.rank_assignments[r].hostname for r in range(self.world_size)]

    def has_rank_assignment(self, host: str, local_rank: int) -> bool:
        """Not blacklisted and holding that slot in the current assignment."""
        if self.is_blacklisted(host):
            return False
        return host in self.host_assignments and len(self.host_assignments[host]) > local_rank

    def get_slot_info(self, host: str, local_rank: int) -> SlotInfo:
        """The slot's place in the current world, or all -1."""
        if self.has_rank_assignment(host, local_rank):
            return self.host_assignments[host][local_rank]
        return INVALID_SLOT

    async def _spawner(self, slot: SlotInfo, sid: int, fut: Future[tuple[int, float]]) -> None:
        code, ts = await fut
        self._exits.pop(sid, None)
        try:
            await self._handle_worker_exit(slot, code, ts)
        except Exception as exc:  # a spawner thread dies with its error logged
            self.rt.record("hvd_spawner_error", slot=f"{slot.hostname}:{slot.local_rank}",
                           error=f"{type(exc).__name__}: {exc}")

    async def _handle_worker_exit(self, slot: SlotInfo, code: int, ts: float) -> None:
        host, lr = slot.hostname, slot.local_rank
        if not self.has_rank_assignment(host, lr):
            self.rt.record("hvd_exit_ignored", slot=f"{host}:{lr}", code=code)
            return
        state = WorkerState.SUCCESS if code == 0 else WorkerState.FAILURE
        rid = await self.registry.record(host, lr, state)
        if self.finished() and self.registry.rendezvous_id == rid:
            self.results.setdefault(f"{host}[{lr}]", (code, ts))

    # -- stop --------------------------------------------------------------------------

    def finished(self) -> bool:
        """Whether the job is stopping."""
        return self.shutdown.is_set()

    async def stop(self, error_message: str | None = None) -> None:
        """Record the error (None clears it, as upstream), stop discovery, kill workers."""
        self.error_message = error_message
        if not self.shutdown.is_set():
            self.rt.record("hvd_stop", error=error_message)
        self.shutdown.set()
        for host in sorted(self.service_of):
            self._kill(host)

    # -- messages ----------------------------------------------------------------------

    def handle(self, msg: Message) -> bool:
        """Serve one driver message; False if it is not the driver's."""
        body = msg.body
        op = body.get("op")
        if op == "conn_req" and body.get("kind") == "rank_and_size":
            if self.server.accept(msg):
                self.rt.spawn(self._rank_and_size(body, str(body["host"]),
                                                  int(body["local_rank"])), "rank_and_size")
        elif op == "conn_req" and body.get("kind") == "worker_addresses":
            # PUT /worker_addresses: the worker's notification service, kept for its slot
            # (upstream also probes the service first; not modelled)
            if self.server.accept(msg):
                self.worker_clients[(str(body["host"]), int(body["local_rank"]))] = \
                    str(body["reply_to"])
                self.server.answer(body, {"ok": True})
        elif op == "epoch_logged":
            self.epochs_logged += 1
        else:
            return False
        return True

    async def _rank_and_size(self, req: Mapping[str, Any], host: str, local_rank: int) -> None:
        if self.finished():
            self.server.answer(req, {"stopped": True})
            return
        try:
            await self.registry.record(host, local_rank, WorkerState.READY)
        except RuntimeError as exc:  # the handler thread dies; the client sees an HTTP error
            self.rt.record("hvd_rank_and_size_error", slot=f"{host}:{local_rank}",
                           error=str(exc))
            self.server.answer(req, {"stopped": True})
            return
        if self.finished():  # the server stopped meanwhile: the client's next request fails
            self.server.answer(req, {"stopped": True})
            return
        slot = self.get_slot_info(host, local_rank)
        self.server.answer(req, {"slot": slot.to_json(), "rendezvous": self.registry.rendezvous_id,
                                 "members": self.members()})

    # -- the launcher ------------------------------------------------------------------

    async def run(self) -> str | None:
        """horovodrun's elastic launch: wait for np slots, start, collect results; the
        error the launcher raises, or None on success."""
        if self.source.fixed() and len(parse_host_slots(self.k.discovery.hosts, 1)) < 2:
            await self.stop(FIXED_HOSTS_MESSAGE)  # launch refuses before any driver runs
            return FIXED_HOSTS_MESSAGE
        self.discovery_task = self.rt.spawn(self.discovery_loop(), "discovery")
        try:
            await self.wait_for_available_slots(self.k.np)
            await self.wait_for_available_slots(self.k.np, self.k.min_start_hosts)
            await self.activate_workers(self.k.np)
        except (RuntimeError, ValueError, TimeoutError) as exc:
            message = self.error_message or str(exc)
            await self.stop(message)
            return message
        await self._join_spawners()
        error, results = self.error_message, dict(self.results)
        await self.stop()
        if error is not None:
            return error
        for name, (code, _ts) in sorted(results.items(), key=lambda kv: kv[1][1]):
            if code != 0:
                return f"{NON_ZERO_EXIT_MESSAGE}, thus the job was aborted ({name}: {code})"
        return None

    async def _join_spawners(self) -> None:
        i = 0
        while i < len(self.spawners):
            await self.spawners[i]
            i += 1
