"""Child processes of real mode: ``python -m elastic_sim.real.proc`` started by a host's process.

A child stays in its parent's process group (a host crash kills it with the host) and is
SIGKILLed by the kernel when its parent dies. Its exit is watched from the moment it
starts: a child that ends normally writes its own ``proc_exit``; one killed by a signal
cannot, so its parent writes it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable

from elastic_sim.protocols.api import SIGNALS, Proc
from elastic_sim.real.runtime.aio import boundary

ExitHook = Callable[["ChildProc", int, str], None]
"""Called once with (child, exit code, reason) when a child killed by a signal ends."""


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
