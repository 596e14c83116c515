"""A campaign stopped by a signal to its own process alone (SIGTERM from a scheduler,
SIGINT from ``kill -INT``) ends at once with its exit code, and leaves none of its worker
processes running: they are terminated and reaped, not left to finish their tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


LONG = ROOT / "tests" / "data" / "busy.yaml"
"""A run that takes minutes: a worker stopped in the middle of one has long to go."""


@pytest.mark.parametrize("command,sig,code", [
    (["sweep", "LONG", "--seeds", "1-6", "--workers", "2"], signal.SIGTERM, 143),
    (["sweep", "LONG", "--seeds", "1-6", "--workers", "2"], signal.SIGINT, 130),
    (["explore", "scale_down", "--budget", "400", "--workers", "2"], signal.SIGTERM, 143),
])
def test_a_signal_to_the_campaign_alone_ends_it_and_its_workers(
        tmp_path: Path, command: list[str], sig: signal.Signals, code: int) -> None:
    command = [str(LONG) if c == "LONG" else c for c in command]
    proc = subprocess.Popen([sys.executable, "-m", "elastic_sim", *command, "--out",
                             str(tmp_path / "out")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while len(workers) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            workers = {p for p in _children(proc.pid) if _alive(p)}
            time.sleep(0.2)
        time.sleep(2.0)  # the workers are in the middle of their tasks
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        gone_by = time.monotonic() + 5
        while any(_alive(p) for p in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not [p for p in workers if _alive(p)], "workers outlived the campaign"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
