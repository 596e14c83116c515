"""Real mode is off the network: the TCPStore listens only on the address the run binds
(loopback by default), and no process of a real run listens anywhere else."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.procs import processes_mentioning, reaped

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="real mode needs torch"),
]

ROOT = Path(__file__).resolve().parents[2]
R = TypeVar("R")


def listeners(pids: set[int]) -> list[tuple[str, int]]:
    """``(local address, pid)`` of every TCP listener owned by one of ``pids``."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        local = line.split()[3]
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in pids:
                found.append((local, pid))
    return found


def hosted_store(bind: str) -> Any:
    from elastic_sim.real.runtime.store import host_store

    async def main() -> Any:
        loop = asyncio.get_running_loop()

        def blocking(fn: Callable[[], R]) -> asyncio.Future[R]:
            return loop.run_in_executor(None, fn)

        return await host_store(blocking, bind, 0)

    return asyncio.run(main())


def test_store_is_refused_from_another_local_address() -> None:
    server = hosted_store("127.0.0.1")
    port = int(server.port)
    # The bound address answers (a raw TCP connect; the store protocol is c10d's).
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    # 127.0.0.2 is this machine too: a server listening on every interface (c10d's own
    # TCPStore given "127.0.0.1") accepts it; ours refuses it.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
    assert listeners({os.getpid()}) == [(f"127.0.0.1:{port}", os.getpid())]
    del server


def test_a_real_run_listens_on_the_bound_address_only(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_sim.cli", "run", "scenarios/scale_down.yaml",
         "--mode", "real", "--out", str(out), "--quiet", "--no-report"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    seen: set[tuple[str, int]] = set()
    with reaped(proc):
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            pids = {proc.pid} | {int(p.split(":")[0]) for p in processes_mentioning(str(out))}
            seen.update(listeners(pids))
            time.sleep(0.1)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # The store, every message server and every Gloo group of the run were seen.
    assert len({pid for _, pid in seen}) >= 4
    assert sorted(a for a, _ in seen if not a.startswith("127.0.0.1:")) == []
