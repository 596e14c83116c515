"""The training script ``--mode torchrun`` gives torchrun when no ``--script`` is named:
the scenario's workload as a real torch program.

torchrun starts it as ``python -u worker.py WORKLOAD_JSON SEED PG_TIMEOUT``. It does what
the model's worker (``protocols/torchelastic/worker.py``) does, with torch: connect to
MASTER_ADDR:MASTER_PORT (``env://``: the agent store, or a store rank 0 hosts), load the
host's last checkpoint, join a Gloo group named after the rendezvous round (bound to the
host's own loopback address, so a network cut between hosts cuts it too), adopt the state
of the rank with the most progress, then per step: sleep ``step_time``, allreduce the
gradients, save a checkpoint every ``commit_every`` steps (local rank 0). A failed
collective ends it with exit code 1, which is all its agent sees.

It writes its trace events (the project's kinds: proc_start, restore, group_init,
group_ready, sync, coll_enter/coll_done/coll_fail, step, commit, proc_exit) through
:mod:`elastic_sim.probe`, as a user's script does (JSON lines stamped with wall time in
``ELASTIC_SIM_TRACE_DIR``; the launcher shifts them to run time), plus what only it knows:
its process group's creation and how it exits. Never unpickles anything.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed

from elastic_sim.probe import Probe, here
from elastic_sim.protocols.static.training import (
    TrainState,
    apply_step,
    choose_root,
    gradients,
    initial_state,
)

dist: Any = torch.distributed  # untyped: its stubs do not re-export the c10d classes


def load_checkpoint(path: Path, host: str, seed: int, nparams: int,
                    probe: Probe) -> TrainState:
    """The host's last checkpoint (a restore event), else the host's initialisation."""
    try:
        ckpt = json.loads(path.read_text())
    except (OSError, ValueError):
        return initial_state(host, seed, nparams)
    state = TrainState(int(ckpt["step"]), tuple(float(p) for p in ckpt["params"]))
    probe.restore(state.step, state.digest())
    return state


def save_checkpoint(path: Path, state: TrainState) -> None:
    """Write the checkpoint atomically (a crash mid-write leaves the previous one)."""
    tmp = path.with_suffix(".part")
    tmp.write_text(json.dumps({"step": state.step, "params": list(state.params),
                               "digest": state.digest()}))
    os.replace(tmp, path)


def gloo_group(store: Any, name: str, rank: int, size: int, addr: str,
               timeout_s: float) -> Any:
    """A Gloo group whose device is bound to this host's address."""
    from datetime import timedelta

    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = timedelta(seconds=timeout_s)
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=addr)]
    return dist.ProcessGroupGloo(dist.PrefixStore(name, store), rank, size, opts)


class Collectives:
    """The group's collectives, traced as the model traces them."""

    def __init__(self, pg: Any, probe: Probe) -> None:
        self._pg, self._probe = pg, probe

    def allreduce(self, values: list[float]) -> list[float]:
        """Sum ``values`` over the group."""
        t = torch.tensor(values, dtype=torch.float64)
        self._run("allreduce", 8 * len(values), lambda: self._pg.allreduce([t]))
        return [float(x) for x in t.tolist()]

    def broadcast(self, blob: bytes | None, size: int, root: int) -> bytes:
        """``root``'s ``size`` bytes to everyone."""
        t = torch.zeros(size, dtype=torch.uint8)
        if blob is not None:
            t[:] = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
        opts = dist.BroadcastOptions()
        opts.rootRank = root
        self._run("broadcast", size, lambda: self._pg.broadcast([t], opts))
        return bytes(t.numpy().tobytes())

    def _run(self, op: str, nbytes: int, start: Any) -> None:
        with self._probe.collective(op, nbytes):
            start().wait()


def train(probe: Probe, work: dict[str, Any], seed: int, pg_timeout: float) -> None:
    """Join the round's group, sync, train to the last step."""
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local_rank = int(env["LOCAL_RANK"])
    ckpt_path = Path(env["ELASTIC_SIM_CHECKPOINT"])
    from datetime import timedelta

    hosts_store = rank == 0 and env.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=hosts_store,
                          timeout=timedelta(seconds=pg_timeout))
    nparams = int(work.get("params", 8))
    state = load_checkpoint(ckpt_path, probe.host, seed, nparams, probe)
    name = probe.group
    probe.record("group_init", group=name, rank=rank, size=world)
    group = Collectives(gloo_group(store, name, rank, world, env["ELASTIC_SIM_ADDR"],
                                   pg_timeout), probe)
    probe.record("group_ready", group=name, rank=rank, size=world)
    progress = [0.0] * world
    progress[rank] = float(state.step)
    root = choose_root(group.allreduce(progress))
    size = max(int(work.get("state_bytes", 1 << 20)), 8 + 8 * nparams)
    blob = group.broadcast(state.to_bytes(size) if rank == root else None, size, root)
    state = TrainState.from_bytes(blob, nparams)
    probe.sync(state.step, state.digest(), root=root)
    steps, step_time = int(work.get("steps", 100)), float(work.get("step_time", 0.1))
    mine = work.get("hosts", {}).get(probe.host, {})  # the host's own (Workload.for_host)
    steps = min(steps, int(mine.get("steps", steps)))
    step_time *= float(mine.get("step_factor", 1.0))
    every = int(work.get("commit_every", 10))
    while state.step < steps:
        time.sleep(step_time)
        summed = group.allreduce(gradients(state.step, rank, nparams))
        state = apply_step(state, summed, world)
        probe.step(state.step)
        if local_rank == 0 and (state.step % every == 0 or state.step == steps):
            save_checkpoint(ckpt_path, state)
            probe.commit(state.step, state.digest())


def main() -> int:
    """Entry: ``worker.py WORKLOAD_JSON SEED PG_TIMEOUT``."""
    work, seed, pg_timeout = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    probe = here()
    if probe is None:
        print("the bundled worker runs under elastic-sim's torchrun mode only",
              file=sys.stderr)
        return 2
    pid = os.getpid()

    def on_term(signum: int, _frame: FrameType | None) -> None:
        probe.record("proc_exit", code=-signum, reason="SIGTERM", pid=pid)
        signal.signal(signum, signal.SIG_DFL)  # die of it, as without this handler
        os.kill(pid, signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        train(probe, work, seed, pg_timeout)
    except Exception as exc:
        probe.record("proc_exit", code=1, reason=f"{type(exc).__name__}", pid=pid)
        return 1
    probe.record("proc_exit", code=0, reason="done", pid=pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
