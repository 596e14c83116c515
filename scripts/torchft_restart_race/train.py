"""One rank of a torchft 0.2.0 replica group under torchrun: Gloo, a one-number model, 40
steps of 0.5 s; group 0's rank 0 SIGKILLs itself at step 10 of its first attempt. Prints
the Manager address each rank's Manager reads from the group's store, and rank 0's own."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from typing import Any

import torch
import torchft.manager as ft_manager
from torch.distributed import TCPStore
from torchft import Manager, ProcessGroupGloo

REPLICA = int(os.environ["REPLICA_GROUP_ID"])
RANK = int(os.environ["RANK"])
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
TAG = f"[g{REPLICA} r{RANK} attempt {ATTEMPT}]"


class LoggedStore:
    """The Manager's store client, saying which Manager address it reads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._store = TCPStore(*args, **kwargs)

    def set(self, key: str, value: Any) -> None:
        self._store.set(key, value)

    def get(self, key: str) -> bytes:
        value: bytes = self._store.get(key)
        if key == "manager_addr":
            print(f"{TAG} Manager() read manager_addr = {value.decode()} at "
                  f"{time.time():.4f}", flush=True)
        return value


def main() -> None:
    """Train 40 steps through the Manager."""
    ft_manager.TCPStore = LoggedStore  # type: ignore[misc,assignment]
    state = {"w": torch.zeros(1)}
    print(f"{TAG} calling Manager() at {time.time():.4f}", flush=True)
    m = Manager(pg=ProcessGroupGloo(), min_replica_size=1,
                load_state_dict=lambda sd: state.update(sd), state_dict=lambda: dict(state),
                replica_id=f"g{REPLICA}", timeout=timedelta(seconds=20),
                quorum_timeout=timedelta(seconds=20), connect_timeout=timedelta(seconds=20))
    if RANK == 0 and m._manager is not None:
        print(f"{TAG} my Manager server: {m._manager.address()}", flush=True)
    while m.current_step() < 40:
        if REPLICA == 0 and RANK == 0 and ATTEMPT == 0 and m.current_step() == 10:
            print(f"{TAG} SIGKILL myself at step 10", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        m.start_quorum()
        grad = torch.ones(1)
        m.allreduce(grad).wait()
        if m.should_commit():
            state["w"] += grad
        if m.current_step() % 5 == 0:
            print(f"{TAG} step {m.current_step()} participants {m.num_participants()}",
                  flush=True)
        time.sleep(0.5)
    print(f"{TAG} DONE at step {m.current_step()}", flush=True)


if __name__ == "__main__":
    main()
