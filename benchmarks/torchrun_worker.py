"""The training loop ``benchmarks/torchrun_compare.py`` gives real ``torchrun`` to run.

Joins the Gloo group through the store torchrun names in MASTER_ADDR/MASTER_PORT (the
agent store), then forever: a short sleep, one allreduce, one JSON line. Every line names
its world by the rendezvous round the worker was started for; a ``spawn`` line is written
before the group init, so a world that never trains still shows.

The agent store outlives a world, so the group's keys get a per-world prefix: the
rendezvous round, read from the rendezvous store (elastic-sim's worker names its group
after the round too). Without one, a restarted rank can read the previous world's
addresses and hang in init (shared/calibration.md).

    torchrun ... torchrun_worker.py LOG_DIR STEP_SECONDS PG_TIMEOUT_SECONDS RDZV_ENDPOINT RUN_ID
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

STARTED = time.time()  # before `import torch`: start-up cost belongs to recovery

import torch  # noqa: E402
import torch.distributed  # noqa: E402

dist: Any = torch.distributed  # untyped: its stubs do not re-export the c10d store classes


def rendezvous_round(endpoint: str, run_id: str, timeout: timedelta) -> int:
    """The current round of the c10d rendezvous (complete: our agents just formed it)."""
    host, port = endpoint.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=timeout)
    state = pickle.loads(base64.b64decode(store.get(f"torch.rendezvous.{run_id}")))
    return int(state.round)


def main() -> int:
    """Train until killed (or until a peer's death fails a collective: exit 1)."""
    log_dir, step_s, pg_timeout = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    endpoint, run_id = sys.argv[4], sys.argv[5]
    env = os.environ
    timeout = timedelta(seconds=pg_timeout)
    rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    rnd = rendezvous_round(endpoint, run_id, timeout)
    common: dict[str, Any] = {
        "pid": os.getpid(),
        "agent_pid": os.getppid(),
        "round": rnd,
        "rank": rank,
        "world_size": world_size,
        "group_rank": int(env.get("GROUP_RANK", "-1")),
        "group_world_size": int(env.get("GROUP_WORLD_SIZE", "-1")),
        "local_rank": int(env.get("LOCAL_RANK", "-1")),
        "restart": int(env.get("TORCHELASTIC_RESTART_COUNT", "-1")),
    }
    with (log_dir / f"worker-{os.getpid()}.jsonl").open("a") as log:
        log.write(json.dumps({"kind": "spawn", "t": STARTED, **common}) + "\n")
        log.flush()
        agent_store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]),
                                    is_master=False, timeout=timeout)
        dist.init_process_group("gloo", store=dist.PrefixStore(f"round{rnd}", agent_store),
                                rank=rank, world_size=world_size, timeout=timeout)
        step = 0
        x = torch.ones(1)
        while True:
            time.sleep(step_s)
            dist.all_reduce(x)
            step += 1
            log.write(json.dumps({"kind": "step", "t": time.time(), "step": step, **common})
                      + "\n")
            log.flush()


if __name__ == "__main__":
    sys.exit(main())
