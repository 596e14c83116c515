"""Making sure no process outlives its run.

Three mechanisms, each a backstop for the others: a process asks the kernel to SIGKILL it
when its parent dies (``PR_SET_PDEATHSIG``); the launcher adopts orphans while a run lasts
(``PR_SET_CHILD_SUBREAPER``) so it can reap them; and at the end it kills every process
whose command line carries the run's marker, found by a scan of ``/proc``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: int) -> int:
    if not sys.platform.startswith("linux"):
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies; exit now if it already has."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)


def set_subreaper(on: bool) -> bool:
    """Adopt (or stop adopting) orphaned descendants; returns the previous setting."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    prev = ctypes.c_int(0)
    libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(prev), 0, 0, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, int(on))
    return bool(prev.value)


@dataclass(frozen=True)
class ProcEntry:
    """One process as ``/proc`` shows it."""

    pid: int
    ppid: int
    pgid: int
    state: str
    """``R``, ``S``, ``T`` (stopped), ``Z`` (zombie)..."""
    start: int
    """Start time in clock ticks since boot (a zombie keeps it)."""


def _entry(pid: int) -> ProcEntry | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # fields[0] is stat's 3rd field
    return ProcEntry(
        pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0], start=int(fields[19])
    )


def start_time(pid: int) -> int:
    """``pid``'s start time in clock ticks since boot (-1 if it is gone): with the pid, an
    identity that a recycled pid does not share."""
    entry = _entry(pid)
    return -1 if entry is None else entry.start


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def scan(marker: str) -> list[ProcEntry]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or marker not in _cmdline(int(name)):
            continue
        entry = _entry(int(name))
        if entry is not None and entry.state != "Z":
            out.append(entry)
    return out


def scan_env(needle: bytes) -> list[tuple[int, str]]:
    """(pid, the rest of the variable) of every live, non-zombie process (this one aside)
    whose environment has a variable starting with ``needle`` (torchrun mode marks its
    agents, and so the workers torchrun starts, in their environment)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for var in env:
            if var.startswith(needle):
                if _proc_state(int(name)) != "Z":
                    out.append((int(name), var[len(needle):].decode()))
                break
    return out


def _proc_state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return raw[raw.rfind(")") + 2:].split()[0]


def is_running(pid: int, marker: str) -> bool:
    """Whether ``pid`` is a live process of the run marked ``marker`` (not a zombie, not
    a recycled pid)."""
    entry = _entry(pid)
    return entry is not None and entry.state != "Z" and marker in _cmdline(pid)


def signal_quietly(pid: int, sig: int, group: bool = False) -> bool:
    """Send ``sig`` to a process (or its group); False if it is gone."""
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_hard(pid: int, group: bool = False) -> None:
    """SIGCONT (a stopped process must not stay stopped) then SIGKILL."""
    signal_quietly(pid, signal.SIGCONT, group)
    signal_quietly(pid, signal.SIGKILL, group)


def reap(procs: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Reap those of ``procs`` (pid, start time) that are exited children of this process
    (adopted orphans, say); their exit codes. A recycled pid is left alone."""
    codes = {}
    for pid, start in procs:
        entry = _entry(pid)
        if entry is None or entry.start != start or entry.ppid != os.getpid():
            continue
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if got == pid:
            codes[pid] = os.waitstatus_to_exitcode(status)
    return codes


def _all_entries() -> list[ProcEntry]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            entry = _entry(int(name))
            if entry is not None:
                out.append(entry)
    return out


def kill_run(
    marker: str,
    leaders: Sequence[subprocess.Popen[bytes]],
    known: Callable[[], Iterable[tuple[int, int]]],
    timeout: float,
) -> bool:
    """Kill every process of the run and reap what falls to this process; True when nothing
    of the run is left.

    The run's processes are found three ways: the process groups of ``leaders`` (this
    process's children, each leading its group; children stay in their host's group), the
    ``marker`` on command lines, and ``known()`` (pid, start time) pairs. The group is the
    one that survives a process's death: an exiting process has already lost its command
    line but not its group, and a zombie keeps both its group and its start time. So the
    loop goes on until no member of the groups and no known process is left, each one
    either reaped here (it was adopted: this process is a subreaper while a run lasts) or
    by its own parent."""
    own = {leader.pid for leader in leaders}
    deadline = time.monotonic() + timeout
    while True:
        unreaped = {leader.pid for leader in leaders if leader.poll() is None}
        for pid in unreaped:  # unreaped, so its pid (= its group id) is not recycled
            kill_hard(pid, group=True)
        ids = {(pid, start) for pid, start in known() if pid not in own}
        entries = _all_entries()
        pids = {e.pid for e in entries}
        # A reaped leader's pid is not reused while its group has members; a process now
        # holding that pid is a recycled one, and its group not the run's.
        groups = {pid for pid in own if pid not in pids or pid in unreaped}
        left = []
        for e in entries:
            ours = e.pgid in groups or (e.pid, e.start) in ids
            if not ours and e.state != "Z" and marker in _cmdline(e.pid):
                ours = True
            if ours and e.pid not in own:
                left.append(e)
        for e in left:
            if e.state != "Z":
                kill_hard(e.pid)
        reaped = reap((e.pid, e.start) for e in left if e.state == "Z")
        remaining = [e for e in left if e.pid not in reaped]
        pending = [leader for leader in leaders if leader.poll() is None]
        if not remaining and not pending:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
