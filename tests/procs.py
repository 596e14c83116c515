"""What real-mode tests look at from outside: processes left on the machine, and the
membership sequence a run's summary reports."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def processes_mentioning(text: str) -> list[str]:
    """Processes (zombies included) other than this one whose command line contains
    ``text``, as ``"pid: command line"``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def membership(summary: dict[str, Any]) -> list[tuple[int, list[str], dict[str, int]]]:
    """(round, members, ranks) of every round in a run's ``summary.json``."""
    return [(r["round"], r["members"], r["ranks"]) for r in summary["metrics"]["rounds"]]


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc``, killed and waited for on the way out if it still runs (a failing test
    leaves no process behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
