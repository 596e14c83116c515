"""The one campaign executor: explore's cases, a sweep's seeds and a comparison's runs go
here, and run on this process, on local worker processes, or as Ray tasks.

A task is a module-level function and its arguments. The executor hands every worker the
campaign's *context* once (a scenario, a search: whatever the tasks share), and calls
``fn(context, *args)``. Results come back in submission order (:meth:`Executor.map`: each
is passed on as soon as it and those before it are in), so a campaign is the same
whatever runs it and however many workers there are. A task that writes a run directory
names it (``out_dir``): on Ray it writes into a scratch directory on whichever node runs
it, and its files come back as bytes and are written here, so a cluster's nodes need no
shared disk. A task marked ``alone`` (a run whose times are measured) starts only when
every task before it is done, and none starts while it runs. A Ray task whose worker
process or node is lost is run again (:data:`RETRIES`).

This module knows nothing of its callers: they bring their own task functions.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from elastic_sim.errors import ScenarioError

LOCAL = "local"
"""The ``--ray`` value that means: start a local Ray."""
RETRIES = 3
"""Times a Ray task is rerun when its worker process or node is lost."""
AHEAD = 3
"""Tasks kept in flight per worker beyond the one being read (none idles between tasks)."""

Task = Callable[..., Any]
"""``fn(context, *args)`` (with ``out_dir`` last when the task writes a run directory)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is: a KeyboardInterrupt, so that it passes through the
    simulator like Ctrl-C does (an exception a simulated process raised would be that
    process's own exit)."""


_STOP: list[KeyboardInterrupt] = []
"""The interrupt a campaign was sent, kept until it ends (see :func:`interrupted`)."""


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While a campaign runs, SIGTERM raises :class:`Terminated` as Ctrl-C raises
    KeyboardInterrupt, so what cleans up in ``finally`` runs: workers are stopped, and
    what was found so far is written (only the main thread can take signals). Either is
    also kept: one raised where Python drops exceptions (a finaliser the garbage collector
    runs, a simulated task closed) is raised again at the campaign's next
    :func:`interrupted` check."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _stop(signum: int, _frame: object) -> None:
        exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        _STOP.append(exc)
        raise exc

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _STOP.clear()


def interrupted() -> None:
    """Raise the interrupt the campaign was sent, if any (between its tasks)."""
    if _STOP:
        raise _STOP[0]


def start_method() -> str:
    """How worker processes start: forked on Linux while this process runs no other
    thread (a fork copies the imported modules: about 0.1 s for two workers, where two
    spawned interpreters take seconds to import everything again, time a small campaign
    feels); spawned otherwise (a forked child could inherit a lock another thread holds,
    and macOS's system libraries do not survive a fork)."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn"


_CONTEXT: Any = None
"""A local worker process's campaign context (set once, when it starts)."""


def _init_worker(context: Any) -> None:
    """A local worker's start: its context, and signals that leave the stopping to the
    campaign. Ctrl-C is the campaign's to handle (a terminal sends it to the whole group),
    SIGTERM ends the worker (a forked worker inherits the campaign's handler, which would
    turn it into a failed task and go on), and the worker dies with the campaign's
    process should that be killed outright."""
    global _CONTEXT
    _CONTEXT = context
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()


def _die_with_parent() -> None:
    """Ask Linux for SIGKILL when the parent process dies (``PR_SET_PDEATHSIG``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the request
        os._exit(1)


def _call_in_worker(fn: Task, args: tuple[Any, ...]) -> Any:
    return fn(_CONTEXT, *args)


def _call_on_ray(fn: Task, context: Any, args: tuple[Any, ...], writes: bool) -> Any:
    """A task on a Ray worker; one that writes a run directory writes a scratch one here,
    and its files come back with its value."""
    if not writes:
        return fn(context, *args)
    with tempfile.TemporaryDirectory(prefix="elastic-sim-ray-") as tmp:
        out = Path(tmp) / "run"
        value = fn(context, *args, out)
        files = {p.relative_to(out).as_posix(): p.read_bytes()
                 for p in out.rglob("*") if p.is_file()} if out.is_dir() else {}
        return value, files


@dataclass
class Handle:
    """A submitted task: its future (or its value, run here) and where its files go."""

    pending: Any
    out_dir: Path | None = None
    alone: bool = False


class Executor:
    """Runs a campaign's tasks: here (``workers`` 1, no ``ray``), on ``workers`` local
    processes, or on Ray (``ray``: ``"local"`` starts one, else a cluster's address)."""

    def __init__(self, context: Any = None, workers: int = 1, ray: str | None = None) -> None:
        self.context = context
        self.pool: ProcessPoolExecutor | None = None
        self.ray: Any = None
        self.workers = max(1, workers)
        if ray is not None:
            self.ray = _join_ray(ray)
            self._remote = self.ray.remote(max_retries=RETRIES)(_call_on_ray)
            self._context = self.ray.put(context)
            self.workers = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        elif self.workers > 1:
            self.pool = ProcessPoolExecutor(
                self.workers, mp_context=get_context(start_method()),
                initializer=_init_worker, initargs=(context,))

    @property
    def local(self) -> bool:
        """Whether tasks run on this process, one at a time, when submitted."""
        return self.pool is None and self.ray is None

    def submit(self, fn: Task, *args: Any, out_dir: Path | None = None,
               alone: bool = False) -> Handle:
        """Start ``fn(context, *args[, out_dir])`` (here, at once, when local)."""
        if self.ray is not None:
            return Handle(self._remote.remote(fn, self._context, args, out_dir is not None),
                          out_dir, alone)
        full = (*args, out_dir) if out_dir is not None else args
        if self.pool is not None:
            return Handle(self.pool.submit(_call_in_worker, fn, full), out_dir, alone)
        return Handle(_Done(fn(self.context, *full)), out_dir, alone)

    def ready(self, h: Handle) -> bool:
        """Whether ``h``'s task has finished (:meth:`result` would not wait)."""
        if self.ray is not None:
            done, _ = self.ray.wait([h.pending], timeout=0)
            return bool(done)
        return not isinstance(h.pending, Future) or h.pending.done()

    def result(self, h: Handle) -> Any:
        """``h``'s value (waits for it); a remote task's files are written to its
        ``out_dir`` here first."""
        if self.ray is not None:
            value = self.ray.get(h.pending)
            if h.out_dir is not None:
                value, files = value
                _write_files(h.out_dir, files)
            return value
        if isinstance(h.pending, Future):
            return h.pending.result()
        return h.pending.value

    def map(self, fn: Task, jobs: Iterable[tuple[Any, ...]], *,
            out_dirs: Callable[[tuple[Any, ...]], Path | None] | None = None,
            alone: Callable[[tuple[Any, ...]], bool] | None = None) -> Iterator[Any]:
        """``fn``'s value for every job (a tuple of its arguments), in the jobs' order,
        each as soon as it and those before it are in; a few jobs per worker are in flight
        at once (one, here). ``out_dirs`` names a job's run directory; ``alone`` marks a
        job that runs by itself."""
        window = 1 if self.local else self.workers * (1 + AHEAD)
        todo = iter(jobs)
        queue: deque[Handle] = deque()
        held: tuple[Any, ...] | None = None
        while True:
            while len(queue) < window:
                job = held if held is not None else next(todo, None)
                held = None
                if job is None:
                    break
                solo = alone(job) if alone else False
                if (solo and queue) or (queue and queue[-1].alone):
                    held = job  # it waits for the queue to empty, or the queue for it
                    break
                queue.append(self.submit(fn, *job, out_dir=out_dirs(job) if out_dirs else None,
                                         alone=solo))
            if not queue:
                return
            interrupted()
            yield self.result(queue.popleft())

    def close(self, now: bool = False) -> None:
        """Stop the worker processes (tasks handed out ahead are dropped), or leave Ray.
        ``now``, or after an interrupt (Ctrl-C, SIGTERM: :func:`terminate_raises`), the
        workers are terminated and reaped at once instead of finishing the tasks they
        run."""
        if self.pool is not None:
            if now or _STOP:
                _terminate(self.pool)
            else:
                self.pool.shutdown(cancel_futures=True)
            self.pool = None
        if self.ray is not None:
            self.ray.shutdown()
            self.ray = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.close(now=isinstance(exc, KeyboardInterrupt))


def _terminate(pool: ProcessPoolExecutor, grace: float = 5.0) -> None:
    """End ``pool``'s worker processes now (SIGTERM, SIGKILL after ``grace``), reap them,
    and drop its pending tasks."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.join(grace)
        if proc.is_alive():
            proc.kill()
            proc.join()


@dataclass
class _Done:
    """The value of a task run here."""

    value: Any


def _write_files(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _join_ray(address: str) -> Any:
    """Start a local Ray (``"local"``) or join a cluster; ScenarioError (exit 2) when Ray
    is missing or the cluster cannot be reached."""
    try:
        import ray
    except ImportError:
        raise ScenarioError("--ray", "", "Ray is not installed; pip install "
                            "'elastic-sim[ray]'") from None
    if address == LOCAL:
        # Local workers import what this process can: its sys.path (a checkout, the
        # modules a scenario's protocol.entry names).
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}}
        ray.init(runtime_env=env, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        return ray
    _reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # ConnectionError, a bad address: the user's input
        raise ScenarioError("--ray", "", f"cannot join the Ray cluster at {address!r}: "
                            f"{exc}") from None
    return ray


def _reachable(address: str) -> None:
    """Fail fast (exit 2) when nothing listens at ``host:port`` (Ray itself retries for
    minutes); ``auto`` and addresses without a port are left to Ray."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ScenarioError("--ray", "", f"cannot join the Ray cluster at {address!r}: "
                            f"{exc}") from None
