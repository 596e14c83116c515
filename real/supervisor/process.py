"""Starting the processes of a real run: ``python -m elastic_sim.real.proc SPEC`` (a host's
first process, started by the launcher, or a child, started by a runtime), and waiting for
the first ones to be ready.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, TypeVar

from elastic_sim.real.supervisor.spec import ProcSpec
from elastic_sim.real.supervisor.workdir import RunDir

T = TypeVar("T")


class LaunchError(RuntimeError):
    """The run could not begin: a process died or stalled before it was ready."""


def wait_ready(procs: Sequence[tuple[T, subprocess.Popen[bytes] | IO[bytes]]],
               timeout: float, died: Callable[[T], str], late: Callable[[list[T]], str]) -> None:
    """Wait until each process has written a line that begins with ``READY`` (it has
    imported torch and waits for ``GO``) to its stdout (a process started with
    ``stdout=PIPE``) or to the pipe given for it (the read end). Raises
    :class:`LaunchError` with ``died(item)`` when one closes it first, or with
    ``late(items not ready)`` after ``timeout`` seconds. Leaves the pipes open."""
    waiting: dict[int, tuple[T, bytes]] = {}
    with selectors.DefaultSelector() as sel:
        for item, proc in procs:
            ready = proc.stdout if isinstance(proc, subprocess.Popen) else proc
            assert ready is not None
            fd = ready.fileno()
            waiting[fd] = (item, b"")
            sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LaunchError(late([item for item, _ in waiting.values()]))
            for key, _ in sel.select(left):
                fd = int(key.fd)
                item, buf = waiting[fd]
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise LaunchError(died(item))
                buf += chunk
                if any(line.startswith(b"READY") for line in buf.split(b"\n")[:-1]):
                    sel.unregister(fd)
                    del waiting[fd]
                else:
                    waiting[fd] = (item, buf)


def popen(
    spec: ProcSpec,
    run_dir: RunDir,
    *,
    new_session: bool,
    stdin: int | None = None,
    stdout: int | None = None,
    prefix: Sequence[str] = (),
    group: int | None = None,
) -> subprocess.Popen[bytes]:
    """Write ``spec`` and start ``python -m elastic_sim.real.proc`` for it; stderr (and stdout
    unless given) go to the process's log file. ``prefix`` is a command that execs the rest (such
    as ``ip netns exec NS``); ``group`` the group id to run with."""
    path = run_dir.spec(spec.name)
    spec.dump(path)
    env = {**os.environ, **spec.env}
    with open(run_dir.log(spec.name), "ab") as log:
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", "elastic_sim.real.proc", str(path)],
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=log if stdout is None else stdout,
            stderr=log,
            env=env,
            start_new_session=new_session,
            group=group,
        )
