"""A torchelastic worker: the training script torchrun starts on every node.

It reads the environment its agent gave it (RANK, WORLD_SIZE, MASTER_ADDR/PORT, ...),
joins the world's process group through the store at MASTER_ADDR:MASTER_PORT (the agent
store in shared mode; otherwise rank 0 hosts one there, as ``env://`` does), loads the
host's last checkpoint, adopts the state of the most advanced rank (as torchelastic's
ImageNet example does after loading), then trains: one allreduce per step, a checkpoint
every ``commit_every`` steps. Any error ends the process with exit code 1, which is all
its agent sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime, Store, TracedGroup
from elastic_sim.protocols.broadcast import broadcast_bytes, broadcast_object
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.protocols.static.training import (
    TrainState,
    apply_step,
    choose_root,
    gradients,
    initial_state,
)


def workload_of(raw: Mapping[str, Any]) -> Workload:
    """The workload from process args (unknown keys ignored)."""
    names = set(Workload.__dataclass_fields__)
    return Workload(**{k: v for k, v in raw.items() if k in names})


async def worker_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Entry of a worker process; returns 0 when the job's last step is done."""
    env = rt.info.env
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    work = workload_of(args["workload"]).for_host(rt.host)
    rnd = int(args["round"])
    members = [str(m) for m in args["members"]]
    local_world = int(env["LOCAL_WORLD_SIZE"])
    # The group's timeout: the knob, or where none is set the backend's default (a world
    # built from a scenario has it settled already; see TorchElasticKnobs.pg_timeout).
    given = args.get("pg_timeout")
    timeout = rt.default_group_timeout() if given is None else float(given)
    # env:// gives the store client the process-group timeout.
    store = await bootstrap_store(rt, env, timeout)
    state = load_checkpoint(rt, args, work)
    group = await rt.new_group(store, f"te-round{rnd}", rank, world, timeout)
    state = await sync_state(rt, group, state, work, rnd, members, local_world)
    agent = str(args["agent"])
    base = state.step

    def grads(i: int) -> list[float]:
        return gradients(base + i, rank, work.params)

    def apply(i: int, summed: list[float]) -> None:
        nonlocal state
        state = apply_step(state, summed, world)

    def checkpoint(i: int) -> None:
        rt.send(agent, {"kind": "checkpoint", "step": state.step,
                        "params": list(state.params), "digest": state.digest()})

    # one allreduce per step (TracedGroup.train); a checkpoint every commit_every steps and
    # at the last, sent at the end of its step: nothing else happens between the steps
    todo = max(work.steps - base, 0)
    marks = [i for i in range(todo)
             if (base + i + 1) % work.commit_every == 0 or base + i + 1 == work.steps]
    await group.train(todo, work.step_time, grads, apply, base + 1, marks=marks,
                      at_mark=checkpoint, round=rnd)
    return 0


async def bootstrap_store(rt: Runtime, env: Mapping[str, str], timeout: float) -> Store:
    """``env://``: a client of MASTER_ADDR:MASTER_PORT; without the agent store, rank 0
    hosts the server there first."""
    addr = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" and int(env["RANK"]) == 0:
        await rt.host_store(int(env["MASTER_PORT"]))
    return await rt.connect_store(addr, timeout)


def load_checkpoint(rt: Runtime, args: Mapping[str, Any], work: Workload) -> TrainState:
    """The host's last checkpoint, or a fresh initialisation when there is none."""
    ckpt = args.get("checkpoint")
    if ckpt is None:
        return initial_state(rt.host, int(args["seed"]), work.params)
    state = TrainState(int(ckpt["step"]), tuple(float(p) for p in ckpt["params"]))
    rt.record("restore", step=state.step, digest=state.digest(), reason="checkpoint")
    return state


async def sync_state(rt: Runtime, group: TracedGroup, state: TrainState, work: Workload,
                     rnd: int, members: list[str], local_world: int) -> TrainState:
    """Adopt the state of the rank with the most progress (lowest rank on ties)."""
    progress = [0.0] * group.size
    progress[group.rank] = float(state.step)
    root = choose_root(await group.allreduce(progress))
    meta = await broadcast_object(group, {"params": len(state.params)}, root)
    blob = state.to_bytes(work.state_bytes) if group.rank == root else None
    data = await broadcast_bytes(group, blob, root, work.state_broadcast)
    state = TrainState.from_bytes(data, int(meta["params"]))
    rt.record("sync", round=rnd, rank=group.rank, root=members[root // local_world],
              step=state.step, digest=state.digest())
    return state
