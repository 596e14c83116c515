"""The real runtime: one per OS process, protocols' coroutines on asyncio.

Time is the machine's wall clock relative to the run's origin ``t0`` (shifted and scaled
by the host's clock skew for :meth:`RealRuntime.now`); messages go over TCP
(:mod:`.net`), the store is a TCPStore (:mod:`.store`), groups are Gloo (:mod:`.group`),
children are ``python -m elastic_sim.real.proc`` (:mod:`.child`). Every blocking torch
call runs on a thread pool so the loop stays free.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from elastic_sim.protocols import api
from elastic_sim.protocols.api import JSON, Message, ProcessInfo, Store
from elastic_sim.real.faults import startfaults
from elastic_sim.real.runtime import aio, group, net, store
from elastic_sim.real.runtime.aio import boundary
from elastic_sim.real.runtime.child import ChildProc
from elastic_sim.real.supervisor import reaper
from elastic_sim.real.supervisor.process import popen
from elastic_sim.real.supervisor.spec import ProcSpec
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.real.supervisor.workdir import RunDir, Started, write_atomic
from elastic_sim.world import collective_model

T = TypeVar("T")

POOL_THREADS = 64
"""Blocking calls in flight at once (a frozen store server can hold several for good)."""

FLUSH_TIMEOUT = 1.0
"""Seconds an exiting process waits for its queued messages to leave."""


class RealRuntime(api.Runtime):
    """The :class:`elastic_sim.protocols.api.Runtime` of one real process."""

    def __init__(self, spec: ProcSpec, t0: float) -> None:
        self.spec = spec
        self.info = ProcessInfo(host=spec.host, name=spec.name, env=dict(spec.env),
                                pid=os.getpid())
        self.rng = random.Random(f"{spec.seed}/proc/{spec.name}")
        self.run_dir = RunDir(Path(spec.workdir))
        self.t0 = t0
        self._mono0 = time.monotonic()
        self._trace = TraceFile(self.run_dir.trace(spec.name))
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="real-blocking")
        self._mailbox = net.Mailbox()
        self._server = net.Server(spec.name, self._mailbox)
        self._outbox = net.Outbox(spec.name, self.run_dir.read_addr)
        self._stores: list[Any] = []  # store servers hosted here: they live as long as we do
        self._children: list[ChildProc] = []

    async def start(self) -> None:
        """Open this process's message server and publish its address."""
        port = await self._server.start(self.spec.bind)
        write_atomic(self.run_dir.addr(self.spec.name), f"{self.spec.address}:{port}\n")

    async def flush(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Hand the messages still queued to the kernel before the process exits (a
        message sent just before exiting is delivered, as in the sim)."""
        await self._outbox.flush(timeout)

    def close(self) -> None:
        """Kill and reap the children still running; stop serving. The process is about
        to exit: nothing of it may outlive it."""
        for child in self._children:
            child.kill_now("parent exited")
        self._server.close()
        self._outbox.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_time(self) -> float:
        """Seconds since the run's origin, on the machine's true clock."""
        return time.time() - self.t0

    # -- time ----------------------------------------------------------------------------

    def now(self) -> float:
        return self.spec.clock_offset + self.run_time() * (1.0 + self.spec.clock_drift)

    def monotonic(self) -> float:
        return (time.monotonic() - self._mono0) * (1.0 + self.spec.clock_drift)

    @boundary
    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # -- concurrency ---------------------------------------------------------------------

    def future(self) -> api.Future[Any]:
        return aio.AioFuture(asyncio.get_running_loop())

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> api.Task[T]:
        return aio.spawn(asyncio.get_running_loop(), coro, name)

    def _blocking(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._pool, fn)

    # -- messages ------------------------------------------------------------------------

    def send(self, dst: str, body: Mapping[str, JSON],
             refused: Mapping[str, JSON] | None = None) -> None:
        # ``refused`` is ignored: the message layer does not surface the real kernel's
        # refusals (a message to a process that is gone is dropped, see Outbox._connect)
        self._outbox.send(dst, body)

    @boundary
    async def recv(self, timeout: float | None = None) -> Message:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = await self._take(await self._mailbox.get(left))
            if msg is not None:
                return msg

    # -- store ---------------------------------------------------------------------------

    @boundary
    async def host_store(self, port: int) -> str:
        """Start a TCPStore server here; its address names this host, as in the sim
        (``h0:29500``), and :meth:`connect_store` resolves it."""
        try:
            server = await store.host_store(self._blocking, self.spec.bind, port)
        except (RuntimeError, OSError) as exc:
            raise api.StoreConnectionError(f"cannot host a store on port {port}: {exc}") from exc
        self._stores.append(server)
        return f"{self.host}:{server.port}"

    @boundary
    async def connect_store(self, addr: str, timeout: float) -> Store:
        """Connect to ``host:port``, where host is a world host name or a network address."""
        try:
            host, port = store.split_addr(addr)
        except ValueError as exc:
            raise api.StoreConnectionError(str(exc)) from None
        return await store.connect_store(self._blocking, self.spec.locate(host), port, timeout)

    # -- process groups ------------------------------------------------------------------

    def default_group_timeout(self) -> float:
        """Gloo's or NCCL's default, by ``cluster.device``."""
        return collective_model(self.spec.device).default_timeout

    @boundary
    async def _new_group(
        self, store: Store, name: str, rank: int, size: int, timeout: float,
        negotiation: api.Negotiation | None = None,
    ) -> api.Group:
        # Gloo and NCCL match collectives by order, not by name: a negotiation is not
        # modelled here (a mismatch fails or times out as in any other group)
        del negotiation
        if self.spec.device == "cuda":
            from elastic_sim.real.runtime import nccl

            return await nccl.new_group(self._blocking, store, name, rank, size, timeout)
        return await group.new_group(
            self._blocking, self.spec.bind, store, name, rank, size, timeout
        )

    # -- processes -----------------------------------------------------------------------

    @boundary
    async def start_process(
        self, name: str, entry: str, args: Mapping[str, JSON], env: Mapping[str, str] | None = None
    ) -> api.Proc:
        full = f"{self.host}/{name}"
        fate = startfaults.take(Path(self.spec.workdir), self.host, is_agent=False)
        spec = ProcSpec(
            name=full,
            host=self.host,
            entry=entry,
            args=dict(args),
            workdir=self.spec.workdir,
            seed=self.spec.seed,
            bind=self.spec.bind,
            parent_pid=os.getpid(),
            env={**(env or {}), **fate},
            clock_offset=self.spec.clock_offset,
            clock_drift=self.spec.clock_drift,
            t0=self.t0,
            sys_path=tuple(sys.path),
            hosts=self.spec.hosts,
            addresses=self.spec.addresses,
            device=self.spec.device,
        )
        proc = popen(spec, self.run_dir, new_session=False)
        start = reaper.start_time(proc.pid)
        self.run_dir.note_started(Started(full, self.host, proc.pid, os.getpid(), start))
        child = ChildProc(full, proc, self._child_killed)
        self._children.append(child)
        return child

    def _child_killed(self, child: ChildProc, code: int, reason: str) -> None:
        self._trace.event(
            self.run_time(),
            self.host,
            child.name,
            "proc_exit",
            {"code": code, "reason": reason, "pid": child.pid},
        )

    def detach(self) -> None:
        """:meth:`~elastic_sim.protocols.api.Runtime.detach`: a file in the run directory
        tells the launcher."""
        write_atomic(self.run_dir.daemon(self.spec.name), "")

    def on_signal(self, sig: str, handler: Callable[[], None] | None) -> None:
        if sig not in api.HANDLED_SIGNALS:
            raise ValueError(f"on_signal({sig!r}): only {', '.join(api.HANDLED_SIGNALS)} "
                             "can be handled")
        signum = signal.Signals[f"SIG{sig}"]
        loop = asyncio.get_running_loop()
        if handler is None:
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_DFL)
        else:
            loop.add_signal_handler(signum, handler)

    # -- trace ---------------------------------------------------------------------------

    def discovery_overlay(self) -> api.DiscoveryOverlay:
        """Always empty: real mode refuses discovery-source faults before a run starts
        (:mod:`elastic_sim.real.faults.injector`), so none is ever in effect."""
        return api.NO_DISCOVERY_FAULTS

    def record(self, kind: str, **fields: JSON) -> None:
        self._trace.event(self.run_time(), self.host, self.name, kind, fields)
