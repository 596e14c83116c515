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

It writes its own trace events (the project's kinds: proc_start, restore, group_init,
group_ready, sync, coll_enter/coll_done/coll_fail, step, commit, proc_exit) as JSON lines
stamped with wall time into ``ELASTIC_SIM_TRACE_DIR``; the launcher shifts them to run
time. Never unpickles anything.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

STARTED = time.time()  # before `import torch`: start-up is part of recovery

import torch  # noqa: E402
import torch.distributed  # noqa: E402

from elastic_sim.protocols.static.training import (  # noqa: E402
    TrainState,
    apply_step,
    choose_root,
    gradients,
    initial_state,
)

dist: Any = torch.distributed  # untyped: its stubs do not re-export the c10d classes


class Trace:
    """This worker's trace events, one JSON line each, flushed at once."""

    def __init__(self, out: TextIO, host: str, proc: str) -> None:
        self._out, self.host, self.proc = out, host, proc

    def event(self, kind: str, t: float | None = None, **data: Any) -> None:
        """Append one event stamped with wall time ``t`` (default now)."""
        line = {"t": time.time() if t is None else t, "host": self.host, "proc": self.proc,
                "kind": kind, "data": data}
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()


def load_checkpoint(path: Path, host: str, seed: int, nparams: int,
                    trace: Trace) -> TrainState:
    """The host's last checkpoint (a restore event), else the host's initialisation."""
    try:
        ckpt = json.loads(path.read_text())
    except (OSError, ValueError):
        return initial_state(host, seed, nparams)
    state = TrainState(int(ckpt["step"]), tuple(float(p) for p in ckpt["params"]))
    trace.event("restore", step=state.step, digest=state.digest(), reason="checkpoint")
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

    def __init__(self, pg: Any, name: str, trace: Trace) -> None:
        self._pg, self.name, self._trace, self._seq = pg, name, trace, 0

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
        seq = self._seq
        self._seq += 1
        self._trace.event("coll_enter", group=self.name, seq=seq, op=op, nbytes=nbytes)
        try:
            start().wait()
        except Exception as exc:
            self._trace.event("coll_fail", group=self.name, seq=seq, op=op,
                              error=type(exc).__name__)
            raise
        self._trace.event("coll_done", group=self.name, seq=seq, op=op)


def train(trace: Trace, work: dict[str, Any], seed: int, pg_timeout: float) -> None:
    """Join the round's group, sync, train to the last step."""
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local_rank = int(env["LOCAL_RANK"])
    rnd = int(env.get("ELASTIC_SIM_ROUND", "-1"))
    ckpt_path = Path(env["ELASTIC_SIM_CHECKPOINT"])
    from datetime import timedelta

    hosts_store = rank == 0 and env.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=hosts_store,
                          timeout=timedelta(seconds=pg_timeout))
    nparams = int(work.get("params", 8))
    state = load_checkpoint(ckpt_path, trace.host, seed, nparams, trace)
    name = f"te-round{rnd}"
    trace.event("group_init", group=name, rank=rank, size=world)
    group = Collectives(gloo_group(store, name, rank, world, env["ELASTIC_SIM_ADDR"],
                                   pg_timeout), name, trace)
    trace.event("group_ready", group=name, rank=rank, size=world)
    store.set(f"elastic-sim/{name}/host/{rank}", trace.host)
    progress = [0.0] * world
    progress[rank] = float(state.step)
    root = choose_root(group.allreduce(progress))
    size = max(int(work.get("state_bytes", 1 << 20)), 8 + 8 * nparams)
    blob = group.broadcast(state.to_bytes(size) if rank == root else None, size, root)
    state = TrainState.from_bytes(blob, nparams)
    root_host = store.get(f"elastic-sim/{name}/host/{root}").decode()
    trace.event("sync", round=rnd, rank=rank, root=root_host, step=state.step,
                digest=state.digest())
    steps, step_time = int(work.get("steps", 100)), float(work.get("step_time", 0.1))
    mine = work.get("hosts", {}).get(trace.host, {})  # the host's own (Workload.for_host)
    steps = min(steps, int(mine.get("steps", steps)))
    step_time *= float(mine.get("step_factor", 1.0))
    every = int(work.get("commit_every", 10))
    while state.step < steps:
        time.sleep(step_time)
        summed = group.allreduce(gradients(state.step, rank, nparams))
        state = apply_step(state, summed, world)
        trace.event("step", round=rnd, step=state.step)
        if local_rank == 0 and (state.step % every == 0 or state.step == steps):
            save_checkpoint(ckpt_path, state)
            trace.event("commit", step=state.step, digest=state.digest())


def main() -> int:
    """Entry: ``worker.py WORKLOAD_JSON SEED PG_TIMEOUT``."""
    work, seed, pg_timeout = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    env = os.environ
    host = env["ELASTIC_SIM_HOST"]
    trace_dir = Path(env["ELASTIC_SIM_TRACE_DIR"])
    proc = f"{host}/w{env['LOCAL_RANK']}"
    with (trace_dir / f"worker-{host}-{os.getpid()}.jsonl").open("a") as out:
        trace = Trace(out, host, proc)
        trace.event("proc_start", t=STARTED, entry="torchrun worker", pid=os.getpid(),
                    restart_count=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")))

        def on_term(signum: int, _frame: FrameType | None) -> None:
            trace.event("proc_exit", code=-signum, reason="SIGTERM", pid=os.getpid())
            signal.signal(signum, signal.SIG_DFL)  # die of it, as without this handler
            os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, on_term)
        try:
            train(trace, work, seed, pg_timeout)
        except Exception as exc:
            trace.event("proc_exit", code=1, reason=f"{type(exc).__name__}", pid=os.getpid())
            return 1
        trace.event("proc_exit", code=0, reason="done", pid=os.getpid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
