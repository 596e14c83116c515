"""A Horovod worker process: the test training script under the elastic run wrapper.

First init uses the ranks it was spawned with; every reset is shutdown + init through the
driver's rank-and-size service (which blocks on the reset barrier), then a new Gloo group
through the driver's store. Only local rank 0 of each host writes the generic trace events
(rdzv_done, sync, step, commit, restore, job_done): the checks read one member per host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import (
    CollectiveError,
    Negotiation,
    OperationTimeout,
    Runtime,
    Store,
    StoreError,
    TracedGroup,
)
from elastic_sim.protocols.horovod.conn import (
    RENDEZVOUS,
    Client,
    ConnectFailed,
    Server,
    Sockets,
)
from elastic_sim.protocols.horovod.discovery import epoch_hosts
from elastic_sim.protocols.horovod.hosts import SlotInfo
from elastic_sim.protocols.horovod.settings import ExitMode, HorovodKnobs, load_knobs
from elastic_sim.protocols.horovod.state import HorovodInternalError, HostsUpdatedInterrupt, State
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.protocols.static.training import apply_step, gradients, initial_state

ABORT_EXIT = 134
"""SIGABRT: Gloo initialisation failed or the slot was removed from the job."""
FOREVER = 1e12
POLL = 0.1
"""The test script's poll period while waiting for an expected notification."""


class RemovedFromJob(Exception):
    """rank_and_size answered -1 (or the driver is gone): the process aborts."""


class ScheduledExit(Exception):
    """The exit schedule's ``exception`` mode (a RuntimeError in the script)."""


class RegistrationFailed(Exception):
    """The PUT of the notification service's addresses failed (urllib, no retry): the
    elastic run wrapper raises before training, and the process exits 1."""


class Worker:
    """One worker process (see the module docstring)."""

    def __init__(self, rt: Runtime, args: Mapping[str, Any]) -> None:
        self.rt = rt
        self.k: HorovodKnobs = load_knobs(args["knobs"])
        self.work = Workload(**args["workload"]).for_host(rt.host)
        self.driver = str(args["driver"])
        self.service = str(args["service"])
        self.store_addr = str(args["store"])
        self.slot = SlotInfo.from_json(args["slot"])
        self.members: list[str] = list(args["members"])
        self.rid = int(args["rendezvous"])
        self.start_rank = self.slot.rank
        self.epochs = self.k.epochs or -(-self.work.steps // self.k.batches_per_epoch)
        model = initial_state(f"{rt.host}:{self.slot.local_rank}", int(args["seed"]),
                              self.work.params)
        self.state = State(rt, model, self.work.state_bytes, self.work.state_broadcast)
        if self.k.reset_callback:
            self.state.register_reset_callbacks([self.on_state_reset])
        self.silent = False
        self.http = Client(rt, self.k.connect_timeout)
        """The HTTP client of the rank-and-size service (a TCP connection per request)."""
        rt.close_in_kernel(Sockets(self.http, Server(rt)))
        rt.on_conn_reset(self.http.reset)
        self.group: TracedGroup | None = None
        self.store: Store | None = None
        self.last_commit_step = -1

    @property
    def lead(self) -> bool:
        """Whether this process speaks for its host in the generic trace (local rank 0)."""
        return self.slot.local_rank == 0

    def wall(self) -> float:
        """Wall-clock seconds on this host."""
        return self.k.wall_clock_base + self.rt.now()

    # -- messages ----------------------------------------------------------------------

    async def dispatch(self) -> None:
        """The notification service and the HTTP client's replies."""
        while True:
            msg = await self.rt.recv()
            if self.silent:
                continue
            if self.http.handle(msg):
                continue
            op = msg.body.get("op")
            if op == "conn_req" and msg.body.get("kind") == "hosts_updated":
                self.rt.record("hvd_notified", timestamp=msg.body["timestamp"],
                               update=msg.body["update"])
                self.state.on_host_updated(int(msg.body["timestamp"]), int(msg.body["update"]))
                self.rt.send(msg.src, {"op": "hosts_updated_ack", "request": dict(msg.body)})

    # -- life --------------------------------------------------------------------------

    async def run(self) -> int:
        """The whole process; its exit code."""
        self.rt.spawn(self.dispatch(), "notification_service")
        try:
            self.store = await self.rt.connect_store(self.store_addr, self.k.gloo_timeout)
            await self.init_group()
            return await self.elastic_run()
        except (RemovedFromJob, StoreError, CollectiveError) as exc:
            self.rt.record("hvd_abort", error=f"{type(exc).__name__}: {exc}")
            return ABORT_EXIT
        except (ScheduledExit, RegistrationFailed) as exc:
            self.rt.record("hvd_exit", error=str(exc), code=1)
            return 1
        except TimeoutError as exc:
            self.rt.record("hvd_exit", error=f"TimeoutError: {exc}", code=1)
            return 1

    async def init_group(self) -> None:
        """Gloo rendezvous of this round through the driver's store."""
        assert self.store is not None
        k = self.k
        self.group = await self.rt.new_group(
            self.store.prefixed(f"hvd/{self.rid}"), f"hvd{self.rid}", self.slot.rank,
            self.slot.size, k.gloo_timeout,
            Negotiation(float(k.stall_check_time), float(k.stall_shutdown_time),
                        not k.stall_check_disable))
        if self.lead:
            self.rt.record("rdzv_done", round=self.rid, members=self.members,
                           rank=self.slot.rank, world_size=self.slot.size)

    async def elastic_run(self) -> int:
        """The run wrapper: sync, train; on an internal error restore and reset, on a
        hosts-updated interrupt reset (skipping sync after removals only)."""
        await self.register()
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    await self.sync()
                return await self.train()
            except HorovodInternalError as exc:
                self.state.restore()
                if self.lead:
                    self.rt.record("restore", step=self.state.model.step,
                                   digest=self.state.model.digest(), reason=str(exc))
                skip_sync = False
            except HostsUpdatedInterrupt as exc:
                self.rt.record("hvd_interrupt", skip_sync=exc.skip_sync)
                skip_sync = exc.skip_sync
            await self.reinit()
            self.state.on_reset()

    async def reinit(self) -> None:
        """reset() + init(): a Gloo error in the new world's rendezvous aborts the process
        (exit 134, knob ``reinit_error: abort``) or resets again (``reset``)."""
        while True:
            try:
                await self.reset()
                return
            except CollectiveError as exc:
                if self.k.reinit_error == "abort":
                    raise
                self.rt.record("hvd_reinit_failed", error=f"{type(exc).__name__}: {exc}")

    async def reset(self) -> None:
        """shutdown + init: leave the group, ask for the new rank (blocks on the barrier)."""
        if self.group is not None:
            self.group.abort()
        reply = await self.rank_and_size()
        if reply.get("stopped"):
            raise RemovedFromJob("rendezvous server stopped")
        slot = SlotInfo.from_json(reply["slot"])
        if slot.rank < 0:
            raise RemovedFromJob(f"{self.rt.host}[{self.slot.local_rank}] has been removed "
                                 "from elastic job")
        self.slot = slot
        self.rid = int(reply["rendezvous"])
        self.members = list(reply["members"])
        await self.init_group()

    async def register(self) -> None:
        """WorkerNotificationManager.init: PUT this process's notification service to the
        driver (urllib over TCP, no retry): a refused, timed-out or reset request raises."""
        cid = self.http.open(self.driver, {"kind": "worker_addresses", "host": self.rt.host,
                                           "local_rank": self.slot.local_rank}, RENDEZVOUS)
        try:
            await self.http.connect(cid)
            await self.http.reply(cid, self.driver)
        except ConnectFailed as exc:
            raise RegistrationFailed(f"Put data input KVStore server failed: {exc}") from exc

    async def rank_and_size(self) -> Mapping[str, Any]:
        """The HTTP GET to the driver, over TCP (retransmitted through a partition):
        HTTPStore::PerformHTTP makes ``http_attempts`` tries, each failed one (connect
        refused or timed out, connection reset) followed by ``http_retry_delay``, then the
        process aborts. A retried GET is a new request: the driver records it again."""
        error = "no attempt"  # http_attempts < 1
        for attempt in range(self.k.http_attempts):
            cid = self.http.open(self.driver, {"kind": "rank_and_size", "host": self.rt.host,
                                               "local_rank": self.slot.local_rank}, RENDEZVOUS)
            try:
                await self.http.connect(cid)
                if attempt == 0:  # the GET goes out now
                    self.rt.record("hvd_ready", round=self.rid, rank=self.slot.rank)
                return await self.http.reply(cid, self.driver)
            except ConnectFailed as exc:
                error = str(exc)
            await self.rt.sleep(self.k.http_retry_delay)
        raise RemovedFromJob(f"rank_and_size: HTTP request failed ({error})")

    async def sync(self) -> None:
        """Everyone adopts rank 0's state."""
        group = self._group()
        try:
            await self.state.sync(group)
        except CollectiveError as exc:
            raise HorovodInternalError(type(exc).__name__) from exc
        if self.lead:
            self.rt.record("sync", round=self.rid, rank=self.slot.rank, root=self.members[0],
                           step=self.state.model.step, digest=self.state.model.digest())
        self.last_commit_step = self.state.model.step

    def on_state_reset(self) -> None:
        """The script's reset callback: what it reads, traced (by the host's lead, as the
        generic events are)."""
        if self.lead:
            st = self.state
            self.rt.record("reset_callback", round=self.rid, rank=self.slot.rank,
                           size=self.slot.size, epoch=st.progress.epoch, step=st.model.step,
                           digest=st.model.digest())

    def _group(self) -> TracedGroup:
        assert self.group is not None
        return self.group

    # -- the training script -----------------------------------------------------------

    async def train(self) -> int:
        """elastic_torch_main.py's ``train``: epochs of batches, commit every k batches,
        rank 0 logs each epoch and waits for an expected host change."""
        st = self.state
        st.advance(rendezvous=st.progress.rendezvous + 1)
        bpe, k = self.k.batches_per_epoch, self.k
        while st.progress.epoch < self.epochs:
            while st.progress.batch < bpe:
                await self.check_exit(st.progress.epoch, st.progress.batch)
                await self.batches(self.run_length(st.progress.epoch, st.progress.batch))
                if st.progress.batch % k.batches_per_commit == 0:
                    st.advance(commits=st.progress.commits + 1)
                    await self.commit()
                if k.host_updates_every and st.progress.batch % k.host_updates_every == 0:
                    await self.collective(st.check_host_updates(self._group()))
            if self.slot.rank == 0:
                await self.log_epoch()
            if k.epoch_wait > 0:
                await self.rt.sleep(k.epoch_wait)
            st.advance(epoch=st.progress.epoch + 1, batch=0, commits=st.progress.commits + 1)
            await self.commit()
        if self.lead:
            self.rt.record("job_done", step=st.model.step, digest=st.model.digest())
        return 0

    def run_length(self, epoch: int, batch: int) -> int:
        """How many batches from ``batch`` on run with nothing between them: up to the next
        commit, host-update check, epoch end or batch with an exit scheduled (for any rank:
        every member must run the same count)."""
        k = self.k
        end = min(k.batches_per_epoch, batch + k.batches_per_commit
                  - batch % k.batches_per_commit)
        if k.host_updates_every:
            end = min(end, batch + k.host_updates_every - batch % k.host_updates_every)
        for entry in k.exit_schedule:
            if entry.epoch == epoch and batch < entry.batch < end:
                end = entry.batch
        return end - batch

    async def batches(self, count: int) -> None:
        """``count`` batches, each the compute, the gradient allreduce and the optimiser
        step (``TracedGroup.train``: one event per run of batches in the fast sim)."""
        st = self.state
        base = st.model.step
        rank, size, nparams = self.slot.rank, self.slot.size, self.work.params

        def grads(i: int) -> list[float]:
            return gradients(base + i, rank, nparams)

        def apply(i: int, summed: list[float]) -> None:
            st.model = apply_step(st.model, summed, size)
            st.advance(batch=st.progress.batch + 1)

        await self.collective(self._group().train(
            count, self.work.step_time, grads, apply, base + 1, trace_step=self.lead,
            round=self.rid))

    async def commit(self) -> None:
        """state.commit(): save, then the collective check for host updates."""
        st = self.state
        st.save()
        if self.lead and st.model.step > self.last_commit_step:
            self.rt.record("commit", step=st.model.step, digest=st.model.digest())
        self.last_commit_step = max(self.last_commit_step, st.model.step)
        await self.collective(st.check_host_updates(self._group()))

    async def collective(self, aw: Any) -> Any:
        """Await a collective; a failed one is a HorovodInternalError."""
        try:
            return await aw
        except CollectiveError as exc:
            raise HorovodInternalError(type(exc).__name__) from exc

    async def log_epoch(self) -> None:
        """Rank 0's log line (the discovery script counts them), then the wait for an
        expected notification when the schedule changes the hosts at the next epoch."""
        p = self.state.progress
        self.rt.record("epoch_log", epoch=p.epoch, batch=p.batch, commits=p.commits,
                       hostname=self.rt.host, start_rank=self.start_rank, rank=self.slot.rank,
                       size=self.slot.size, rendezvous=p.rendezvous)
        self.rt.send(self.driver, {"op": "epoch_logged", "epoch": p.epoch})
        schedule = self.k.discovery.schedule
        if self.k.discovery_wait <= 0 or not any(e.epoch is not None for e in schedule):
            return
        if epoch_hosts(schedule, p.epoch) == epoch_hosts(schedule, p.epoch + 1):
            return
        start = int(self.wall())
        # The test script zeroes the timestamp here so that a notification stamped in the
        # same wall-clock second as the last one still interrupts (upstream's workaround).
        self.state.last_updated_timestamp = 0
        while not self.state.host_messages.qsize():
            if int(self.wall()) - start > self.k.discovery_wait:
                raise TimeoutError("Timed out waiting for notifications from driver.")
            await self.rt.sleep(POLL)

    async def check_exit(self, epoch: int, batch: int) -> None:
        """The exit schedule, checked at the top of every batch against the start rank."""
        for entry in self.k.exit_schedule:
            if (entry.epoch, entry.batch) == (epoch, batch) and self.start_rank in entry.ranks:
                await self.leave(entry.mode or self.k.exit_mode, epoch, batch)

    async def leave(self, mode: ExitMode, epoch: int, batch: int) -> None:
        """Leave the job the scheduled way."""
        what = (f"check_rank and exit epoch={epoch} batch={batch} start_rank={self.start_rank} "
                f"rank={self.slot.rank}")
        self.rt.record("hvd_scheduled_exit", mode=mode, epoch=epoch, batch=batch,
                       start_rank=self.start_rank)
        if mode == "exception":
            raise ScheduledExit(what)
        if mode == "exit0":
            raise SystemExit(0)
        if mode == "kill":
            self.rt.send(self.service, {"op": "kill_me", "name": self.rt.name})
        if mode == "silent":
            self.silent = True
            self.rt.send(self.service, {"op": "stop_me", "name": self.rt.name})
        await self.rt.sleep(FOREVER)


async def worker_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Entry of a worker process started by a host's task service."""
    try:
        return await Worker(rt, args).run()
    except SystemExit as exc:
        return int(exc.code or 0)
    except OperationTimeout:
        return ABORT_EXIT
