"""The entry of every process of a real run: ``python -m elastic_sim.real.proc SPEC``.

It becomes the process the spec names: dies with its parent, imports torch up front (so
the first store or group call is not an import), and, for a host's first process, says
``READY`` on stdout and waits for the launcher's ``GO <t0>`` on stdin. It then waits for
its host's start time, runs the entry on asyncio, lingers ``world.PROCESS_EXIT`` (upstream's
interpreter teardown, during which a store it hosts still answers), writes its
``proc_exit`` and exits with the entry's code (1 if it raised). Exiting with ``os._exit`` is
deliberate: threads stuck in Gloo or a frozen store must not hold the process up.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

from elastic_sim.faults.model import CrashAtStart
from elastic_sim.protocols.api import exit_status, resolve_entry
from elastic_sim.real.faults.startfaults import DELAY, FAIL
from elastic_sim.real.runtime.runtime import RealRuntime
from elastic_sim.real.supervisor import reaper
from elastic_sim.real.supervisor.spec import ProcSpec
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.real.supervisor.workdir import RunDir
from elastic_sim.world import PROCESS_EXIT


def main(argv: list[str]) -> NoReturn:
    """Run the process described by the spec file ``argv[1]``."""
    spec = ProcSpec.load(Path(argv[1]))
    reaper.die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the contract: INT kills by default
    sys.path[:0] = [p for p in spec.sys_path if p not in sys.path]
    run_dir = RunDir(Path(spec.workdir))
    t0 = spec.t0
    try:
        import torch.distributed  # noqa: F401  (the import is the point: ~1.5 s cold)

        if t0 is None:
            t0 = _handshake(run_dir.log(spec.name))
        time.sleep(max(0.0, t0 + spec.start_at - time.time()))
        asyncio.run(_run(spec, t0))
    except BaseException as exc:
        traceback.print_exc()
        if t0 is not None:
            reason = f"{type(exc).__name__}: {exc}"
            TraceFile(run_dir.trace(spec.name)).event(
                time.time() - t0,
                spec.host,
                spec.name,
                "proc_exit",
                {"code": 1, "reason": reason, "pid": os.getpid()},
            )
        _exit(1)
    _exit(1)  # _run never returns


def _handshake(log: Path) -> float:
    """Say READY, wait for ``GO <t0>``; then stdout becomes the log (the pipe is done)."""
    sys.stdout.write(f"READY {os.getpid()}\n")
    sys.stdout.flush()
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "GO":
        _exit(1)  # the launcher went away before the run began
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    return float(line[1])


async def _run(spec: ProcSpec, t0: float) -> NoReturn:
    rt = RealRuntime(spec, t0)
    await rt.start()
    rt.record("proc_start", entry=spec.entry)
    try:
        delay, doomed = os.environ.pop(DELAY, ""), os.environ.pop(FAIL, "")
        if delay:
            await asyncio.sleep(float(delay))  # a slow start (elastic_sim.real.faults.startfaults)
        if doomed:
            raise CrashAtStart(doomed)  # a crash loop: up, then gone
        code, reason = exit_status(await resolve_entry(spec.entry)(rt, spec.args))
    except BaseException as exc:  # Cancelled included: the process ends either way
        if not isinstance(exc, SystemExit):
            traceback.print_exc()
        code, reason = exit_status(None, exc)
    # An upstream process's interpreter teardown: its Python code has ended, what it hosts
    # (a store's thread) still answers. os._exit below skips the real teardown, which would
    # make this process leave faster than upstream's (the sim charges the same figure).
    time.sleep(PROCESS_EXIT)
    await rt.flush()
    rt.close()
    rt.record("proc_exit", code=code, reason=reason, pid=os.getpid())
    _exit(code)


def _exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

