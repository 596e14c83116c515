"""The bundled training loop of ``--mode torchft`` on upstream's own objects: a
``torchft.Manager`` with a ``ProcessGroupGloo`` and the ``HTTPTransport``, the loop of the
model (:mod:`elastic_sim.protocols.torchft.train`: draw a batch, ``start_quorum``, compute,
``allreduce``, ``should_commit``, step), its parameters a float64 tensor.

It records the events the model records, read off upstream's objects without changing
what they do: the quorum results its ``ManagerClient`` returns, the votes it sends, the
process group reconfigurations, the checkpoint fetches of a heal, the state a heal loads.
Runs on a thread of the rank's process; ``record`` hands each event to the runtime's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from elastic_sim.protocols.api import JSON
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.protocols.static.training import (
    LEARNING_RATE,
    TrainState,
    gradients,
    initial_state,
)
from elastic_sim.protocols.torchft.manager import replica_host
from elastic_sim.protocols.torchft.train import knobs_of, workload_of

Record = Callable[..., None]


class Seen:
    """What the loop learnt from upstream's objects this step."""

    def __init__(self) -> None:
        self.result: Any = None
        """The last quorum result."""
        self.vote: bool | None = None
        self.healed = False
        self.sync_due = False
        self.group = ""
        self.seq = 0
        self.replica = ""
        """This replica group's id (rank 0's, from the group's store)."""


class Client:
    """Upstream's ``ManagerClient``, seen: its quorum results and votes are recorded."""

    def __init__(self, inner: Any, seen: Seen, record: Record, rank: int, replica: str) -> None:
        self._inner = inner
        self._seen = seen
        self._record = record
        self._rank = rank
        self._replica = replica

    def _quorum(self, **kwargs: Any) -> Any:
        res = self._inner._quorum(**kwargs)
        self._seen.result = res
        ids = list(res.replica_ids)
        src = res.recover_src_replica_rank
        self._record("ft_quorum", quorum_id=int(res.quorum_id), replica_id=self._replica,
                     group_rank=self._rank, replica_rank=int(res.replica_rank),
                     replica_world_size=int(res.replica_world_size), step=int(kwargs["step"]),
                     max_step=int(res.max_step), heal=bool(res.heal),
                     src=None if src is None else replica_host(ids[int(src)]),
                     dst=[int(r) for r in res.recover_dst_replica_ranks],
                     store=str(res.store_address),
                     commit_failures=int(kwargs.get("commit_failures", 0)))
        return res

    def should_commit(self, group_rank: int, step: int, should_commit: bool,
                      timeout: timedelta) -> bool:
        self._seen.vote = should_commit
        return bool(self._inner.should_commit(group_rank, step, should_commit, timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def train(args: Mapping[str, Any], record: Record, host: str, bind: str,
          store: tuple[str, int]) -> int:
    """One rank's run on upstream's torchft: 0 when its loop is done, 1 when upstream
    raised (a quorum or should_commit that timed out, a heal past its lock's timeout)."""
    import torch
    from torchft import Manager, ProcessGroupGloo
    from torchft.checkpointing import HTTPTransport

    knobs = knobs_of(args["knobs"])
    work: Workload = workload_of(args["workload"], host)
    rank = int(args["group_rank"])
    seen = Seen()
    params = torch.tensor(initial_state(f"{host}.shard{rank}", int(args["seed"]),
                                        work.params).params, dtype=torch.float64)

    def state() -> TrainState:
        return TrainState(manager.current_step(), tuple(float(p) for p in params.tolist()))

    def load_state_dict(sd: Mapping[str, Any]) -> None:
        params.copy_(sd["params"])
        seen.healed = True
        res = seen.result
        src = res.recover_src_replica_rank if res is not None else None
        root = replica_host(list(res.replica_ids)[int(src)]) if src is not None else host
        _sync(record, rank, res, root, manager.current_step(), state().digest())

    class Transport(HTTPTransport):  # type: ignore[misc]
        """Upstream's HTTP transport; a fetch is recorded (a heal's transfer)."""

        def recv_checkpoint(self, src_rank: int, metadata: str, step: int,
                            timeout: timedelta) -> Any:
            sd = super().recv_checkpoint(src_rank, metadata, step, timeout)
            res = seen.result
            record("ft_heal", quorum_id=int(res.quorum_id), replica_id=seen.replica,
                   group_rank=rank, src=replica_host(list(res.replica_ids)[src_rank]),
                   src_replica_rank=int(src_rank), step=int(step),
                   digest=TrainState(step, tuple(float(p) for p in
                                                 sd["user"]["default"]["params"].tolist())
                                     ).digest())
            return sd

    class Group(ProcessGroupGloo):  # type: ignore[misc]
        """Upstream's reconfigurable Gloo group; a reconfiguration is recorded."""

        def configure(self, store_addr: str, replica_id: str, rank_: int, world_size: int,
                      *rest: Any) -> None:
            res = seen.result
            name = f"torchft_rank_{rank}_quorum_{int(res.quorum_id)}"
            record("group_init", group=name, rank=rank_, size=world_size)
            try:
                super().configure(store_addr, replica_id, rank_, world_size, *rest)
            except Exception as exc:
                record("group_failed", group=name, rank=rank_, size=world_size,
                       error=type(exc).__name__)
                raise
            record("group_ready", group=name, rank=rank_, size=world_size)
            record("rdzv_done", round=int(res.quorum_id),
                   members=[replica_host(r) for r in res.replica_ids], rank=rank_,
                   world_size=world_size)
            seen.group, seen.seq, seen.sync_due = name, 0, not bool(res.heal)

    t = timedelta
    manager = Manager(
        pg=Group(timeout=t(seconds=knobs.pg_timeout)),
        load_state_dict=load_state_dict, state_dict=lambda: {"params": params.clone()},
        min_replica_size=knobs.min_replica_size, use_async_quorum=knobs.use_async_quorum,
        timeout=t(seconds=knobs.timeout), quorum_timeout=t(seconds=knobs.quorum_timeout),
        connect_timeout=t(seconds=knobs.connect_timeout), rank=rank,
        world_size=knobs.ranks_per_replica, store_addr=store[0], store_port=store[1],
        lighthouse_addr=str(args["lighthouse"]), replica_id=host, hostname=bind,
        heartbeat_interval=t(seconds=knobs.heartbeat_interval),
        checkpoint_transport=Transport(timeout=t(seconds=knobs.timeout), num_chunks=0),
        init_sync=knobs.init_sync, max_retries=knobs.max_retries,
        quorum_retries=knobs.quorum_retries)
    seen.replica = manager._store.get("replica_id").decode()
    manager._client = Client(manager._client, seen, record, rank, seen.replica)
    try:
        _loop(manager, params, work, knobs.stop_on, knobs.shrink_only, rank, seen, record,
              state, torch, knobs.data_warmup)
    except Exception as exc:  # upstream raised: the rank's process fails
        record("ft_error", where="loop", error=f"{type(exc).__name__}: {exc}"[:500])
        return 1
    finally:
        manager.shutdown(wait=False)
    if rank == 0:
        record("job_done", step=manager.current_step(), digest=state().digest())
    return 0


def _loop(manager: Any, params: Any, work: Workload, stop_on: str, shrink_only: bool,
          rank: int, seen: Seen, record: Record, state: Callable[[], TrainState],
          torch: Any, warmup: float) -> None:
    import time

    position = 0
    time.sleep(warmup)
    while True:
        if stop_on == "steps" and manager.current_step() >= work.steps:
            return
        if stop_on == "data" and position >= work.steps:
            return
        position += 1
        manager.start_quorum(shrink_only=shrink_only)
        time.sleep(work.step_time)  # forward and backward
        grads = torch.tensor(gradients(position, rank, work.params), dtype=torch.float64)
        manager.wait_quorum()  # what allreduce does first: the group is configured after
        entered = manager.errored() is None and seen.group
        if entered:
            record("coll_enter", group=seen.group, seq=seen.seq, op="allreduce",
                   nbytes=8 * work.params)
        ok = manager.allreduce(grads).wait()
        if entered:
            failed = not ok or manager.errored() is not None
            record("coll_fail" if failed else "coll_done", group=seen.group, seq=seen.seq,
                   op="allreduce", **({"error": "CollectiveFailed"} if failed else {}))
            seen.seq += 1
            if seen.sync_due and not failed:
                seen.sync_due = False
                _sync(record, rank, seen.result, replica_host(seen.result.replica_ids[
                    int(seen.result.replica_rank)]), manager.current_step(), state().digest())
        errored = manager.errored()
        committed = manager.should_commit()
        if errored is not None:
            record("ft_error", where="step", error=str(errored).split("\n", 1)[0][:300])
        record("ft_should_commit", quorum_id=int(seen.result.quorum_id),
               replica_id=seen.replica, group_rank=rank,
               vote=bool(seen.vote), decision=bool(committed), step=manager.current_step(),
               participants=int(manager.num_participants()), position=position)
        if seen.healed:  # the loader is not healed: the rank resumes it at the step
            seen.healed = False
            position = manager.current_step()
        if committed:
            params.sub_(LEARNING_RATE * grads)
            record("step", round=int(seen.result.quorum_id), step=manager.current_step(),
                   digest=state().digest(), data=position, shard=rank)


def _sync(record: Record, rank: int, res: Any, root: str, step: int, digest: str) -> None:
    """``sync`` of group rank 0's shard, as the model records it."""
    if rank == 0 and res is not None:
        fields: dict[str, JSON] = {"round": int(res.quorum_id),
                                   "rank": int(res.replica_rank), "root": root,
                                   "step": step, "digest": digest}
        record("sync", **fields)
