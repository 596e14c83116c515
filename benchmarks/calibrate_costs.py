"""Measure the time costs the sim charges where upstream spends time (issue 13, item 3).

Each figure is measured on real torch (the installed 2.13) on this machine and printed
as median / p90 over ``--trials`` runs; the sim's defaults (``elastic_sim.world`` and
``elastic_sim.protocols.torchelastic.knobs``) quote them:

- ``process_exit``: a Python process that imported ``torch.distributed`` and hosts a
  ``TCPStore`` (a torchrun agent with ``is_host``) returns from its main: seconds from its
  last statement until its store stops answering a client (interpreter teardown, the store
  thread's end).
- ``state_encode``: torchelastic's ``_RendezvousState`` for N participants pickled and
  base64-encoded, as ``C10dRendezvousBackend.set_state`` does (and decoded back, as a
  ``get_state`` does), per N.
- ``pcontext_close``: ``PContext.close()`` of a worker group whose workers have already
  exited (what ``LocalElasticAgent._shutdown`` does after a successful run).

    python benchmarks/calibrate_costs.py [--trials 20]
"""

from __future__ import annotations

import argparse
import base64
import pickle
import select
import socket
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta

CHILD = r"""
import sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, True, wait_for_workers=False)
print("ready", flush=True)
sys.stdin.readline()
print(repr(time.monotonic()), flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def process_exit(trials: int) -> list[float]:
    """Seconds from a store-hosting torch process's last statement until a client's open
    connection to its store sees the end (one connection, made before: probing with new
    connections would keep the server busy)."""
    out = []
    for _ in range(trials):
        port = _free_port()
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(port)], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        child.stdout.readline()
        with socket.create_connection(("127.0.0.1", port)) as client:
            child.stdin.write("go\n")
            child.stdin.flush()
            last = float(child.stdout.readline())
            select.select([client], [], [], 30.0)
            out.append(time.monotonic() - last)
        child.wait()
    return out


def state_encode(trials: int, nodes: int) -> list[float]:
    """Seconds to pickle + base64 a rendezvous state of ``nodes`` participants, and back."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
        _NodeDesc,
        _RendezvousState,
    )
    state = _RendezvousState()
    now = datetime.now()
    for i in range(nodes):
        node = _NodeDesc(f"host-{i:05d}.cluster.local", 1000 + i, 0)
        state.participants[node] = i
        state.last_heartbeats[node] = now + timedelta(seconds=i)
    state.deadline = now
    out = []
    for _ in range(trials):
        t0 = time.perf_counter()
        blob = base64.b64encode(pickle.dumps(state))
        pickle.loads(base64.b64decode(blob))
        out.append(time.perf_counter() - t0)
    return out


def pcontext_close(trials: int) -> list[float]:
    """Seconds ``PContext.close()`` takes once its (one) worker has exited 0."""
    import tempfile

    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes
    out = []
    for i in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            ctx = start_processes(
                name=f"calib{i}", entrypoint="/bin/true", args={0: ()}, envs={0: {}},
                logs_specs=DefaultLogsSpecs(log_dir=tmp))
            while ctx.wait(0) is None:
                time.sleep(0.01)
            t0 = time.perf_counter()
            ctx.close()
            out.append(time.perf_counter() - t0)
    return out


def _show(name: str, xs: list[float]) -> None:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    print(f"{name}: median {statistics.median(xs) * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms, "
          f"min {xs[0] * 1e3:.3f}, max {xs[-1] * 1e3:.3f} (n={len(xs)})")


def main() -> None:
    """Print each cost's median and p90."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    a = ap.parse_args()
    for n in (2, 8, 64, 512, 4096):
        _show(f"state_encode N={n}", state_encode(max(a.trials, 20), n))
    _show("pcontext_close", pcontext_close(a.trials))
    _show("process_exit", process_exit(a.trials))


if __name__ == "__main__":
    main()
