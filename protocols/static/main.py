"""The static protocol's host process: rendezvous, sync, train, recover."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from elastic_sim.protocols.api import (
    CollectiveError,
    Runtime,
    Store,
    StoreConnectionError,
    TracedGroup,
)
from elastic_sim.protocols.broadcast import broadcast_bytes, broadcast_object
from elastic_sim.protocols.static.rendezvous import (
    DONE_KEY,
    POLL,
    JobEnded,
    Membership,
    RendezvousTimeout,
    late_record,
    next_membership,
    record_done,
    someone_waiting,
)
from elastic_sim.protocols.static.settings import StaticKnobs, Workload
from elastic_sim.protocols.static.training import (
    TrainState,
    apply_step,
    choose_root,
    gradients,
    initial_state,
)

FINISHED_KEY = "job/finished"


def _settings(cls: type[Any], raw: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in raw.items() if k in names})


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Entry of every host: ``args`` holds knobs, workload, store_host and seed."""
    return await run_host(rt, args, Member)


async def run_host(rt: Runtime, args: Mapping[str, Any], member: type[Member]) -> int:
    """A host's life with ``member`` as its behaviour (variants subclass :class:`Member`)."""
    knobs: StaticKnobs = _settings(StaticKnobs, args.get("knobs", {}))
    work: Workload = _settings(Workload, args.get("workload", {})).for_host(rt.host)
    store_host = str(args["store_host"])
    if rt.host == store_host:
        await rt.host_store(knobs.store_port)
    try:
        store = await rt.connect_store(f"{store_host}:{knobs.store_port}", knobs.store_timeout)
    except StoreConnectionError as exc:
        rt.record("job_failed", error=f"store unreachable: {exc}")
        return 1
    life = member(rt, store, knobs, work, int(args.get("seed", 0)))
    return await life.run(is_store_host=rt.host == store_host)


class Member:
    """One host's life in the job: rounds of (rendezvous, sync, train) until done."""

    def __init__(
        self, rt: Runtime, store: Store, knobs: StaticKnobs, work: Workload, seed: int
    ) -> None:
        self.rt = rt
        self.store = store
        self.knobs = knobs
        self.work = work
        self.state = initial_state(rt.host, seed, work.params)
        self.committed = self.state

    async def run(self, is_store_host: bool) -> int:
        """Train to completion; 0 when done, 1 when the job cannot go on."""
        round_ = 0
        last: int | None = None  # the round this host was last a member of
        while True:
            try:
                membership = await next_membership(self.rt, self.store, round_, self.knobs,
                                                   last)
            except RendezvousTimeout as exc:
                self.rt.record("rdzv_failed", round=round_, error=str(exc))
                self.rt.record("job_failed", error=f"rendezvous: {exc}")
                return 1
            except JobEnded:
                self.rt.record("job_done", step=self.state.step, digest=self.state.digest())
                return 0
            except StoreConnectionError as exc:
                self.rt.record("job_failed", error=f"store lost: {exc}")
                return 1
            round_ = last = membership.round
            try:
                outcome = await self.run_round(membership)
            except CollectiveError as exc:
                self.restore(str(type(exc).__name__))
                round_ += 1
                continue
            except StoreConnectionError as exc:
                self.rt.record("job_failed", error=f"store lost: {exc}")
                return 1
            if outcome == "done":
                return await self.finish(membership, is_store_host)
            round_ += 1

    async def run_round(self, m: Membership) -> Literal["done", "rejoin"]:
        """Form the round's group, sync the state, train until done or asked to rejoin."""
        group = await self.rt.new_group(
            self.store, f"round{m.round}", m.rank, m.world_size, self.knobs.group_timeout
        )
        try:
            await self.sync(group, m)
            if late_record(self.knobs, m):
                record_done(self.rt, m)
            return await self.train(group, m)
        except CollectiveError:
            group.abort()
            raise

    async def sync(self, group: TracedGroup, m: Membership) -> None:
        """Adopt the state of the member with the most progress (usually rank 0)."""
        progress = [0.0] * m.world_size
        progress[m.rank] = float(self.state.step)
        if self.knobs.broken_uneven_sync and m.rank > 0:
            progress.append(0.0)
        root = choose_root((await group.allreduce(progress))[:m.world_size])
        if not self.knobs.skip_state_broadcast:
            header = {"step": self.state.step, "params": len(self.state.params)}
            meta = await broadcast_object(group, header, root)
            blob = self.state.to_bytes(self.work.state_bytes) if m.rank == root else None
            self.state = TrainState.from_bytes(
                await broadcast_bytes(group, blob, root, self.work.state_broadcast),
                int(meta["params"]),
            )
        self.committed = self.state
        self.rt.record(
            "sync",
            round=m.round,
            rank=m.rank,
            root=m.members[root],
            step=self.state.step,
            digest=self.state.digest(),
        )

    async def train(self, group: TracedGroup, m: Membership) -> Literal["done", "rejoin"]:
        """Steps with one allreduce each; commit every k; leave if hosts wait to join."""
        work = self.work
        world = m.world_size

        def apply(i: int, summed: list[float]) -> None:
            self.state = apply_step(self.state, summed[:-1], world)

        while self.state.step < work.steps:
            # the steps before the next commit-due one ask no store and never leave (no one
            # sends "waiting" there): one allreduce each (TracedGroup.train)
            base = self.state.step
            due = min(base + work.commit_every - base % work.commit_every, work.steps)
            if due - base > 1:
                def plain(i: int, base: int = base) -> list[float]:
                    return [*gradients(base + i, m.rank, work.params), 0.0]

                await group.train(due - base - 1, work.step_time, plain, apply, base + 1,
                                  round=m.round)
            await self.rt.sleep(work.step_time)
            next_step = self.state.step + 1
            commit_due = next_step % work.commit_every == 0 or next_step == work.steps
            waiting = (
                commit_due
                and self.knobs.admit_waiting
                and await someone_waiting(self.store, m.round + 1)
            )
            grads = gradients(self.state.step, m.rank, work.params)
            summed = await group.allreduce([*grads, 1.0 if waiting else 0.0])
            self.state = apply_step(self.state, summed[:-1], m.world_size)
            self.rt.record("step", round=m.round, step=self.state.step)
            if commit_due:
                self.committed = self.state
                self.rt.record("commit", step=self.state.step, digest=self.state.digest())
                while self.knobs.broken_spin_at_commit:
                    await self.rt.sleep(0)
            rejoin = commit_due and self.knobs.broken_rejoin_at_commit
            if (summed[-1] > 0 or rejoin) and self.state.step < work.steps:
                self.rt.record("rdzv_leave", round=m.round, reason="hosts waiting")
                return "rejoin"
        return "done"

    def restore(self, reason: str) -> None:
        """Roll back to the last commit after a failed collective."""
        self.state = self.committed
        self.rt.record(
            "restore", step=self.state.step, digest=self.state.digest(), reason=reason
        )

    async def finish(self, m: Membership, is_store_host: bool) -> int:
        """Mark the job done; the store host keeps serving until members and waiters saw it."""
        self.rt.record("job_done", step=self.state.step, digest=self.state.digest())
        try:
            await self.store.set(DONE_KEY, b"1")
            finished = await self.store.add(FINISHED_KEY, 1)
            if is_store_host:
                deadline = self.rt.monotonic() + self.knobs.group_timeout
                while finished < m.world_size and self.rt.monotonic() < deadline:
                    await self.rt.sleep(POLL / 10)
                    finished = await self.store.add(FINISHED_KEY, 0)
                await self.rt.sleep(POLL * 1.5)  # hosts waiting for a round poll DONE_KEY
        except StoreConnectionError:
            pass  # the job is done; the store host may be gone already
        return 0
