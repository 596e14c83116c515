"""Child processes of real mode: ``python -m elastic_sim.real.proc`` started by a host's process.

A child stays in its parent's process group (a host crash kills it with the host) and is
SIGKILLed by the kernel when its parent dies. Its exit is watched from the moment it
starts: a child that ends normally writes its own ``proc_exit``; one killed by a signal
cannot, so its parent writes it.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from elastic_sim.protocols.api import SIGNALS, Proc
from elastic_sim.real.aio import boundary
from elastic_sim.real.spec import ProcSpec
from elastic_sim.real.workdir import RunDir

ExitHook = Callable[["ChildProc", int, str], None]
"""Called once with (child, exit code, reason) when a child killed by a signal ends."""

T = TypeVar("T")


class LaunchError(RuntimeError):
    """The run could not begin: a process died or stalled before it was ready."""


def wait_ready(procs: Sequence[tuple[T, subprocess.Popen[bytes]]], timeout: float,
               died: Callable[[T], str], late: Callable[[list[T]], str]) -> None:
    """Wait until each process (started with ``stdout=PIPE``) has written a line that
    begins with ``READY`` (it has imported torch and waits for ``GO``). Raises
    :class:`LaunchError` with ``died(item)`` when one closes its stdout first, or with
    ``late(items not ready)`` after ``timeout`` seconds. Leaves the pipes open."""
    waiting: dict[int, tuple[T, bytes]] = {}
    with selectors.DefaultSelector() as sel:
        for item, proc in procs:
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
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


class ChildProc(Proc):
    """A child process; its exit is noticed as it happens (pidfd), not when polled."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], on_killed: ExitHook) -> None:
        self.name = name
        self.pid = proc.pid
        self._proc = proc
        self._on_killed = on_killed
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.kill_reason = ""
        """Why a signal-killed exit happened, when this process caused it."""
        self._watch()

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._poller = loop.create_task(self._poll_loop())
            return

        def readable() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            self._finish(self._proc.wait())

        loop.add_reader(fd, readable)

    async def _poll_loop(self) -> None:
        while self._proc.poll() is None:
            await asyncio.sleep(0.02)
        self._finish(self._proc.returncode)

    def _finish(self, code: int) -> None:
        if self._exited.done():
            return
        self._exited.set_result(code)
        if code < 0:
            sig = signal.Signals(-code).name.removeprefix("SIG")
            self._on_killed(self, code, self.kill_reason or f"signal {sig}")

    def poll(self) -> int | None:
        code = self._proc.poll()
        if code is not None:
            self._finish(code)
        return code

    @boundary
    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def signal(self, sig: str) -> None:
        if sig not in SIGNALS:
            raise ValueError(f"signal {sig!r}: expected one of {SIGNALS}")
        if self.poll() is None:
            self._proc.send_signal(getattr(signal, f"SIG{sig}"))

    def kill_now(self, reason: str) -> None:
        """SIGKILL and reap it at once (its parent is about to exit)."""
        if self.poll() is not None:
            return
        self.kill_reason = reason
        self._proc.send_signal(signal.SIGCONT)
        self._proc.kill()
        deadline = time.monotonic() + 5.0
        while self._proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        self.poll()
