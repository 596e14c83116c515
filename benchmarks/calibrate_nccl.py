#!/usr/bin/env python3
"""What torch's NCCL does on a GPU when a collective never completes, against what the
sim's NCCL profile assumes (``elastic_sim.world.NCCL``: the group's timeout, 600 s by
default, then the watchdog tears the process down, exit -6, under torchrun's
``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``; nothing happens without it).

One GPU is enough: a world-size-1 NCCL group whose collective is queued behind a kernel
that spins (``torch.cuda._sleep``) never completes, as one waiting on a peer that died
never does. Each case runs in a child process, timed from the collective's enqueue to the
child's end:

- ``teardown``: ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` (torchrun's), group timeout ``T``;
- ``no_teardown``: ``TORCH_NCCL_ASYNC_ERROR_HANDLING=0``: the process is expected to live
  on (it is stopped after ``T`` + 20 s); the work's state is read after the timeout;
- ``monitor``: as ``teardown`` with ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`` short, to see
  whether the heartbeat monitor or the watchdog ends the process.

Also printed: torch's and NCCL's versions, ``default_pg_nccl_timeout``, and the time a
world-size-1 NCCL group takes to form and run its first all-reduce.

    python benchmarks/calibrate_nccl.py [--timeout 10] [--out DIR]

Needs a CUDA GPU (exits 2 without one). Writes ``nccl_calibration.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import datetime, os, sys, time
import torch
import torch.distributed as dist
timeout, spin_s, linger = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
t0 = time.monotonic()
store = dist.TCPStore("127.0.0.1", 0, 1, True)
dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=timeout),
                        device_id=torch.device("cuda:0"))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print(f"FORMED {time.monotonic() - t0:.3f}", flush=True)
rate = torch.cuda.get_device_properties(0).clock_rate if hasattr(
    torch.cuda.get_device_properties(0), "clock_rate") else 1_980_000
torch.cuda._sleep(int(spin_s * rate * 1000))  # clock_rate is in kHz
work = dist.all_reduce(x, async_op=True)
print(f"ENQUEUED {time.monotonic():.3f}", flush=True)
deadline = time.monotonic() + timeout + linger
while time.monotonic() < deadline:
    time.sleep(0.5)
try:
    done = work.is_completed()
    exc = work.exception() if hasattr(work, "exception") else None
except Exception as e:  # noqa: BLE001
    done, exc = None, e
print(f"ALIVE {time.monotonic():.3f} completed={done} exception={exc!r}"[:400], flush=True)
"""


def case(name: str, timeout: float, env: dict[str, str], spin_s: float,
         linger: float) -> dict[str, Any]:
    """One child: its lines, exit code and the seconds from enqueue to its end."""
    full = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(timeout), str(spin_s),
                             str(linger)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=full)
    lines: list[str] = []
    enqueued = None
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        if line.startswith("ENQUEUED"):
            enqueued = time.monotonic()
    code = proc.wait(timeout=spin_s + 120)
    end = time.monotonic()
    formed = next((float(x.split()[1]) for x in lines if x.startswith("FORMED")), None)
    return {"case": name, "env": env, "timeout_s": timeout, "exit_code": code,
            "formed_s": formed,
            "enqueue_to_end_s": None if enqueued is None else round(end - enqueued, 3),
            "wall_s": round(end - start, 3), "alive_line": next(
                (x for x in lines if x.startswith("ALIVE")), None),
            "log": [x[:300] for x in lines if x.startswith("[rank")][:12]}


def main() -> int:
    """Run the cases, print and write what they showed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=10.0, help="the group's timeout (s)")
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--linger", type=float, default=60.0,
                    help="seconds the child lives on past the timeout if nothing ends it")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("calibrate_nccl: no CUDA GPU here", file=sys.stderr)
        return 2
    import torch.distributed as dist
    from torch.distributed import constants

    t, linger = args.timeout, args.linger
    spin = t + linger + 60  # the GPU is still busy when the child would end by itself
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpu": torch.cuda.get_device_name(0),
            "default_pg_nccl_timeout_s": constants.default_pg_nccl_timeout.total_seconds()
            if constants.default_pg_nccl_timeout is not None else None,
            "nccl_available": dist.is_nccl_available()}
    print(json.dumps(info), flush=True)
    cases = [
        case("teardown", t, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, spin, linger),
        case("no_teardown", t, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}, spin, linger),
        case("monitor", t, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "5"}, spin, linger),
    ]
    for c in cases:
        print(json.dumps(c), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "nccl_calibration.json").write_text(
        json.dumps({"info": info, "cases": cases}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
