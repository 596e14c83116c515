"""The bundled training loop of one rank (torchft's ``train_ddp.py`` shape): draw a
batch, ``optimizer.zero_grad()`` (the Manager's ``start_quorum``), forward and backward,
the gradient allreduce through the Manager, and ``optimizer.step()``, which steps only
when should_commit says yes.

Nothing is committed anywhere but in the replicas' memory (the loop saves no checkpoint):
a step that should_commit turns down is traced by ``ft_should_commit`` alone, and a job
whose replicas all die loses every step.

The data position is the number of batches this replica group's shard has given: every
iteration draws one, committed or not (a failed step's batch is dropped, as upstream's
sampler drops it). It is not part of what a heal transfers: a recovering rank resumes its
shard at the healed step, so a source that lost a step to a failure is one batch ahead of
the replicas it heals (torchft issue #309).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime, StoreError
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.protocols.static.training import apply_step, gradients, initial_state
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.protocols.torchft.manager import Manager, Model
from elastic_sim.protocols.torchft.manager_server import ManagerStartError
from elastic_sim.protocols.torchft.rpc import Endpoint, RpcError

STORE_TIMEOUT = 300.0
"""The Manager's client of its group's store: ``TCPStore(...)``'s default timeout."""


def knobs_of(raw: Mapping[str, Any]) -> TorchFTKnobs:
    """Knobs from process args (unknown keys ignored, upstream defaults for the rest)."""
    names = {f.name for f in dataclasses.fields(TorchFTKnobs)}
    return TorchFTKnobs(**{k: v for k, v in raw.items() if k in names})


def workload_of(raw: Mapping[str, Any], host: str) -> Workload:
    """The workload as ``host`` runs it."""
    names = {f.name for f in dataclasses.fields(Workload)}
    return Workload(**{k: v for k, v in raw.items() if k in names}).for_host(host)


async def rank_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """A rank's process: 0 once its loop is done, 1 when it raised (its launcher decides
    what next)."""
    knobs = knobs_of(args["knobs"])
    work = workload_of(args["workload"], rt.host)
    group_rank = int(args["group_rank"])
    store_address = str(args["store_address"])
    try:
        store = await rt.connect_store(store_address, STORE_TIMEOUT)
    except StoreError as exc:
        rt.record("ft_error", where="start", error=f"{type(exc).__name__}: {exc}")
        return 1
    ep = Endpoint(rt)
    model = Model(initial_state(f"{rt.host}.shard{group_rank}", int(args["seed"]),
                                work.params))
    manager = Manager(rt, ep, knobs, model, store, store_address, group_rank,
                      str(args["lighthouse"]), work.state_bytes)
    delay = float(args.get("start_delay", 0.0))
    if delay:
        await rt.sleep(delay)  # this rank's process started later than its rank 0's
    try:
        await manager.start()
        await train(rt, manager, model, knobs, work)
    except (ManagerStartError, StoreError, RpcError, TimeoutError, RuntimeError) as exc:
        rt.record("ft_error", where="loop", error=f"{type(exc).__name__}: {exc}")
        return 1
    if group_rank == 0:
        rt.record("job_done", step=manager.step, digest=model.state.digest())
    return 0


async def train(rt: Runtime, manager: Manager, model: Model, knobs: TorchFTKnobs,
                work: Workload) -> None:
    """The loop, until the steps are done (``stop_on: steps``) or the shard is
    exhausted (``stop_on: data``)."""
    await rt.sleep(knobs.data_warmup)
    while True:
        if knobs.stop_on == "steps" and manager.step >= work.steps:
            return
        if knobs.stop_on == "data" and model.position >= work.steps:
            return
        model.position += 1  # the batch is drawn before the step, committed or not
        await manager.start_quorum()
        await rt.sleep(work.step_time)  # forward and backward
        grads = await manager.allreduce(gradients(model.position, manager.group_rank,
                                                  work.params))
        committed = await manager.should_commit()
        if manager.healed:  # the loader is not healed: the rank resumes it at the step
            manager.healed = False
            model.position = manager.step
        if committed:
            model.state = apply_step(model.state, grads, 1)
            rt.record("step", round=manager.quorum_id, step=manager.step,
                      digest=model.state.digest(), data=model.position,
                      shard=manager.group_rank)
