"""The warden: a small process that outlives the launcher and cleans up after it.

The launcher starts it first, in a session of its own (no group kill of the run reaches
it) and without the run's marker on its command line (no scan of the run kills it), and
keeps the write end of a pipe to its stdin. The first line it reads names what to watch
(the run's marker, its network namespace). When the pipe closes, because the launcher
ended (cleanly, or killed by SIGKILL with no chance to clean up), the warden kills every
process still carrying the marker and deletes the namespace, then exits. After a clean
run there is nothing left to do and it exits at once.

Its processes die with their parents anyway (``PR_SET_PDEATHSIG``); the warden is the
backstop for what the kernel does not clean: a namespace (and its nftables table), and a
process that had not yet asked for its parent-death signal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO

from elastic_sim.real.supervisor import reaper

SETTLE = 0.2
"""Seconds the warden lets the kernel's parent-death signals act before it scans."""
ROUNDS = 50
"""Scans (SETTLE apart) before it gives up on a process that will not die."""


def start(marker: str, namespace: str | Sequence[str] | None,
          env_mark: str | None = None) -> subprocess.Popen[bytes]:
    """Start a warden for the run marked ``marker`` on command lines (and ``env_mark``, a
    ``NAME=value`` prefix, in environments; and its namespace, or namespaces: the
    cluster's netns launcher makes a hub and one per node); the caller keeps the returned
    process's stdin open for as long as the run lasts."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_sim.real.warden"], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    assert proc.stdin is not None
    names = [namespace] if isinstance(namespace, str) else list(namespace or ())
    proc.stdin.write((json.dumps({"marker": marker, "netns": names,
                                  "env_mark": env_mark}) + "\n").encode())
    proc.stdin.flush()
    return proc


def dismiss(guard: subprocess.Popen[bytes]) -> None:
    """The run is over and cleaned: let the warden go (it finds nothing left) and reap it."""
    if guard.stdin is not None:
        guard.stdin.close()
    try:
        guard.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass  # it exits on its own; subprocess reaps it later


def clean(marker: str, namespace: str | Sequence[str] | None,
          env_mark: str | None = None) -> tuple[int, bool]:
    """Kill what carries ``marker`` (or ``env_mark`` in its environment), delete
    ``namespace`` (or each of several); (processes killed, whether a namespace was
    there)."""
    killed = 0
    for _ in range(ROUNDS):
        left = [e.pid for e in reaper.scan(marker)]
        if env_mark:
            left += [pid for pid, _ in reaper.scan_env(env_mark.encode())]
        if not left:
            break
        for pid in left:
            reaper.kill_hard(pid)
            killed += 1
        time.sleep(SETTLE)
    deleted = False
    for name in [namespace] if isinstance(namespace, str) else list(namespace or ()):
        done = subprocess.run(["ip", "netns", "del", name], capture_output=True,
                              timeout=30, check=False)
        deleted = deleted or done.returncode == 0
    return killed, deleted


def watch(stdin: IO[bytes]) -> None:
    """Read what to watch, wait for the launcher to go (EOF), clean up."""
    first = stdin.readline()
    if not first:
        return
    what = json.loads(first)
    while stdin.read(4096):
        pass  # nothing else is ever sent: EOF is the launcher's end
    time.sleep(SETTLE)
    clean(str(what["marker"]), what.get("netns"), what.get("env_mark"))

