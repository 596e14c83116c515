"""Hosts and processes: start, exit, kill, signals, pause and resume, crash.

A process is a set of :class:`~elastic_sim.sim.kernel.SimTask` s (its main and what it spawned), a
mailbox and a runtime. It ends when its main returns or raises (its other tasks are then
cancelled), or when it is killed (its tasks are dropped at once: their coroutines are closed
with the process already dead, so nothing they do in ``finally`` has an effect).

A paused host (a hang) or a stopped process (SIGSTOP) runs nothing: continuations that become
due meanwhile are deferred on the host, in order, and replayed when it runs again.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from elastic_sim.faults.model import CrashAtStart
from elastic_sim.protocols.api import (
    JSON,
    SIGNAL_NUMBERS,
    SIGNALS,
    Entry,
    KernelSockets,
    Message,
    Runtime,
    exit_status,
    resolve_entry,
)
from elastic_sim.sim.clock import HostClock
from elastic_sim.sim.kernel import Kernel
from elastic_sim.sim.mailbox import Mailbox
from elastic_sim.sim.tasks import SimFuture, SimTask
from elastic_sim.world import HostSpec, World

log = logging.getLogger(__name__)


class SimHost:
    """One machine: its clock, its processes, and whether it is up, down or paused."""

    def __init__(self, spec: HostSpec) -> None:
        self.name = spec.name
        self.spec = spec
        self.clock = HostClock(spec.clock_offset, spec.clock_drift)
        self.started = False
        self.down = False
        self.paused = 0
        """How many hangs hold it now (it runs when 0)."""
        self.slowdown = 1.0
        """How many times longer its compute (sleeps) takes: a straggler."""
        self.restarts_pending = 0
        """Crash-restarts under way: the run does not end while one is."""
        self.powered_off = False
        """Down without a word: peers' connections to it see no FIN or RST (a power-off);
        their stores and groups wait for their own timeouts instead of failing at once."""
        self.procs: dict[str, SimProcess] = {}
        """Live processes by name, in start order."""
        self.deferred: list[tuple[SimProcess, Callable[..., object], tuple[Any, ...]]] = []
        self.incarnations: dict[str, int] = {}
        self.next_port = 29500
        self.start_delay = spec.start_delay
        """Extra seconds every process started here takes to start (the host's own, plus
        slow start faults)."""
        self.start_fault: Callable[[str], str] | None = None
        """Given a starting process's short name: why it fails at start-up ("" if it
        does not): a crash loop (:mod:`elastic_sim.sim.faults`)."""
        self.closed: dict[str, KernelSockets] = {}
        """The sockets of processes that ended while this host lived, by process name:
        its kernel answers for them (:meth:`Runtime.close_in_kernel`) until it goes down
        or a process of that name starts again."""
        self.ended: set[str] = set()
        """Processes that ended while this host lived (or failed at start), not started
        again since and the host not down since: nothing listens for them, and its kernel
        refuses a connection to one (``refused`` of :meth:`Runtime.send`)."""


class SimProcess:
    """One simulated OS process (implements :class:`elastic_sim.sim.kernel.Owner`)."""

    def __init__(
        self,
        cluster: Cluster,
        host: SimHost,
        name: str,
        entry: str,
        args: Mapping[str, JSON],
        env: dict[str, str],
        incarnation: int,
    ) -> None:
        self.cluster = cluster
        self.host = host
        self.name = name
        self.entry = entry
        self.args = args
        self.env = env
        self.incarnation = incarnation
        self.pid = 0
        """Set by the cluster at start (a restarted process gets a new pid)."""
        self.start_time = cluster.kernel.now
        self.alive = True
        self.exiting = False
        self.stopped = False
        self.runnable = host.paused == 0
        self.exit_code: int | None = None
        self.tasks: dict[int, SimTask[Any]] = {}
        self.wedged: dict[str, list[tuple[SimTask[Any], int, Any, BaseException | None]]] = {}
        """Activities (task names) stuck by a wedge fault, with the wake-ups held."""
        self.ticks: list[Any] = []
        """Its polled waits that skip ticks (:mod:`elastic_sim.sim.ticks`)."""
        self._next_tid = 0
        self.main: SimTask[Any] | None = None
        self.mailbox = Mailbox(cluster.kernel)
        self.handlers: dict[str, Callable[[], None]] = {}
        self.on_death: list[Callable[[], None]] = []
        """Called once when the process ends (its stores die, its groups lose a member)."""
        self.kernel_answer: Callable[[Message], Mapping[str, JSON] | None] | None = None
        """Answers the host's kernel gives for this process (:meth:`Runtime.answer_in_kernel`)."""
        self.kernel_sockets: KernelSockets | None = None
        """What the host's kernel says for its sockets once it ended
        (:meth:`Runtime.close_in_kernel`)."""
        self.conn_reset: Callable[[Callable[[str], bool]], None] | None = None
        """Told when a conn_reset fault resets its connections (:meth:`Runtime.on_conn_reset`)."""
        self.exited: SimFuture[int] = SimFuture(cluster.kernel)
        self.rt: Runtime | None = None
        self.torn_down: tuple[int, str] | None = None
        """Set by a backend's watchdog that ends the process (exit code, reason): if its
        main ends on the error first, it exits with these at once, not with its own."""
        self.nccl_since: float | None = None
        """When its first process group on GPUs was created: its NCCL heartbeat monitor
        checks from then on (None: it has none; :mod:`elastic_sim.sim.heartbeat`)."""
        self.gpu_wedged = False
        """Its GPU work is wedged for good (a ``gpu_wedge`` fault)."""
        self.daemon = False
        """It stands for a daemon outside the job (:meth:`Runtime.detach`): the run does not
        wait for it."""

    def defer(self, fn: Callable[..., object], *args: Any) -> None:
        """Hold a continuation until this process runs again."""
        self.host.deferred.append((self, fn, args))

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> SimTask[Any]:
        """A new task of this process, first stepped at the current time."""
        self._next_tid += 1
        task: SimTask[Any] = SimTask(self.cluster.kernel, self, coro, name, self._next_tid)
        if not self.alive or self.exiting:
            task.kill()  # a dying process starts nothing
            return task
        self.tasks[task.tid] = task
        task.start()
        return task

    def task_done(self, task: SimTask[Any]) -> None:
        """A task finished; when it is main, the process exits."""
        self.tasks.pop(task.tid, None)
        if task is self.main and self.alive and not self.exiting:
            self.cluster.main_done(self, task)


async def _after(startup: float, main: Entry, rt: Runtime, args: Mapping[str, JSON]) -> int:
    """``main(rt, args)`` once the process has started up."""
    await rt.sleep(startup)
    return await main(rt, args)


async def _fail_after(startup: float, rt: Runtime, why: str) -> int:
    await rt.sleep(startup)
    raise CrashAtStart(why)


def json_copy(args: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A deep copy through JSON: what a real process could be handed; TypeError if not."""
    if not isinstance(args, Mapping):
        raise TypeError(f"{what} must be a JSON object, not {type(args).__name__}")
    try:
        out: dict[str, Any] = json.loads(json.dumps(dict(args)))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from exc
    return out


FIRST_PID = 1000
"""The sim's first process id."""


class Cluster:
    """Every host and process of a run, and their life cycles."""

    def __init__(
        self, kernel: Kernel, world: World, make_runtime: Callable[[SimProcess], Runtime]
    ) -> None:
        self.kernel = kernel
        self.world = world
        self.make_runtime = make_runtime
        self.hosts: dict[str, SimHost] = {h.name: SimHost(h) for h in world.hosts}
        if len(self.hosts) != len(world.hosts):
            raise ValueError("host names must be unique")
        self.procs: dict[str, SimProcess] = {}
        """Live processes by name."""
        self.exit_codes: dict[str, int] = {}
        self.live = 0
        self.daemons = 0
        """Live processes that are daemons (:meth:`detach`): the run does not wait for them."""
        self.next_pid = FIRST_PID
        """Pids are handed out in start order, so they are deterministic."""
        self.pending_starts = 0
        self.finished = False
        self.resume_listeners: list[Callable[[], None]] = []
        """Called when something may have become reachable again (resume, CONT, heal)."""
        self.touch_listeners: list[Callable[[], None]] = []
        """Called before anything happens to a process or host from outside it (a kill, a
        signal, a pause or resume, a crash) and before each fault: fast training stretches
        end there (:mod:`elastic_sim.sim.stretch`)."""
        self.exit_listeners: list[Callable[[], None]] = []
        """Called when a process has exited (its exit code is readable now)."""

    def touch(self) -> None:
        """Something is about to act on processes from outside: tell the listeners."""
        for fn in self.touch_listeners:
            fn()

    # -- starting ----------------------------------------------------------------------

    def schedule_starts(self) -> None:
        """Start each host's first process at the host's ``start_at``."""
        for host in self.hosts.values():
            self.pending_starts += 1
            self.kernel.call_at(host.spec.start_at, self._start_host, host,
                                lane=("host", host.name))
        self.check_end()

    def _start_host(self, host: SimHost) -> None:
        if host.down or host.started:
            return  # crashed before it started, or started early (already uncounted)
        self.pending_starts -= 1
        host.started = True
        w = self.world
        self.start(host, w.proc_name, w.entry, json_copy(w.args, "world.args"), {})
        self.check_end()

    def start(
        self, host: SimHost, short: str, entry: str, args: dict[str, Any], env: dict[str, str],
        startup: float = 0.0,
    ) -> SimProcess:
        """Start process ``host/short`` running ``entry(rt, args)`` after ``startup``
        seconds (interpreter start and imports: the process exists, and can be signalled or
        killed, before its entry runs); emit ``proc_start``."""
        name = f"{host.name}/{short}"
        if name in self.procs:
            raise ValueError(f"process {name} is already running")
        host.closed.pop(name, None)
        host.ended.discard(name)
        inc = host.incarnations.get(name, -1) + 1
        host.incarnations[name] = inc
        proc = SimProcess(self, host, name, entry, args, env, inc)
        proc.pid = self.next_pid
        self.next_pid += 1
        proc.rt = self.make_runtime(proc)
        self.procs[name] = proc
        host.procs[name] = proc
        self.live += 1
        slowed = {"slowed": host.start_delay} if host.start_delay > 0 else {}  # slow_start
        self.kernel.trace(host.name, name, "proc_start", {"entry": entry, **slowed})
        doomed = host.start_fault(short) if host.start_fault is not None else ""
        startup += host.start_delay
        try:
            main = resolve_entry(entry)
            if doomed:
                coro = _fail_after(startup, proc.rt, doomed)
            elif startup <= 0:
                coro = main(proc.rt, args)
            else:
                coro = _after(startup, main, proc.rt, args)
            if not inspect.iscoroutine(coro):
                raise TypeError(f"entry {entry!r} did not return a coroutine")
        except Exception as exc:
            self._finalize(proc, 1, f"{type(exc).__name__}: {exc}")
            return proc
        proc.main = proc.spawn(coro, "main")
        return proc

    # -- ending ------------------------------------------------------------------------

    def main_done(self, proc: SimProcess, task: SimTask[Any]) -> None:
        """Main returned or raised: cancel the other tasks, then exit after the world's
        ``process_exit`` (interpreter teardown: until then the process exists, and what it
        hosts, a store, still answers)."""
        code, reason = exit_status(task._result, task._exc)
        proc.exiting = True
        for t in list(proc.tasks.values()):
            t.cancel_now()
        cost = self.world.process_exit * proc.host.slowdown
        if proc.torn_down is not None:  # aborted: no interpreter teardown
            (code, reason), cost = proc.torn_down, 0.0
        if cost <= 0.0:
            self._finalize(proc, code, reason)
        else:
            self.kernel.call_later(cost, self._exit_done, proc, code, reason,
                                   lane=("exit", proc.name))

    def _exit_done(self, proc: SimProcess, code: int, reason: str) -> None:
        """The end of a teardown: the process is gone unless it was killed meanwhile; a
        frozen one (hang, SIGSTOP) finishes when it runs again."""
        if not proc.alive:
            return
        if not proc.runnable:
            proc.defer(self._exit_done, proc, code, reason)
            return
        self._finalize(proc, code, reason)

    def kill(self, proc: SimProcess, code: int, reason: str) -> None:
        """End ``proc`` at once (a signal or a crash): its tasks are dropped."""
        if not proc.alive:
            return
        self.touch()
        proc.alive = False
        proc.runnable = False
        tasks = list(proc.tasks.values())
        proc.tasks.clear()
        for t in tasks:
            t.kill()
        self._finalize(proc, code, reason)

    def _finalize(self, proc: SimProcess, code: int, reason: str) -> None:
        proc.alive = False
        proc.runnable = False
        proc.exit_code = code
        self.procs.pop(proc.name, None)
        proc.host.procs.pop(proc.name, None)
        if not proc.host.down:
            proc.host.ended.add(proc.name)
        self.exit_codes[proc.name] = code
        self.kernel.trace(proc.host.name, proc.name, "proc_exit", {"code": code, "reason": reason})
        proc.mailbox.clear()
        hooks, proc.on_death = proc.on_death, []
        for hook in hooks:
            hook()
        proc.exited.set_result(code)
        for fn in self.exit_listeners:
            fn()
        self.live -= 1
        if proc.daemon:
            self.daemons -= 1
        self.check_end()

    def detach(self, proc: SimProcess) -> None:
        """``proc`` stands for a daemon outside the job (:meth:`Runtime.detach`)."""
        if proc.alive and not proc.daemon:
            proc.daemon = True
            self.daemons += 1
            self.check_end()

    def check_end(self) -> None:
        """Stop the run once every process but the daemons has exited and no host is still
        to start (a daemon still running is dropped with the run, untraced)."""
        if (not self.finished and self.live == self.daemons and self.pending_starts == 0
                and not any(h.restarts_pending for h in self.hosts.values())):
            self.finished = True
            self.kernel.stop_after(0.0)

    def close(self) -> None:
        """The run is over: drop what still runs, silently (nothing is traced any more)."""
        for proc in list(self.procs.values()):
            proc.alive = False
            proc.runnable = False
            for t in list(proc.tasks.values()):
                t.kill()
            proc.tasks.clear()

    # -- signals -----------------------------------------------------------------------

    def signal(self, proc: SimProcess, sig: str) -> None:
        """Deliver ``sig`` at the current time, after the current step."""
        if sig not in SIGNALS:
            raise ValueError(f"unknown signal {sig!r}: expected one of {SIGNALS}")
        if proc.alive:
            self.kernel.soon(self._deliver, proc, sig)

    def _deliver(self, proc: SimProcess, sig: str) -> None:
        if not proc.alive:
            return
        self.touch()
        if sig == "KILL":
            self.kill(proc, -SIGNAL_NUMBERS["KILL"], "killed by SIGKILL")
        elif sig == "STOP":
            proc.stopped = True
            proc.runnable = False
        elif sig == "CONT":
            if proc.stopped:
                proc.stopped = False
                proc.runnable = proc.host.paused == 0
                if proc.runnable:
                    self._flush(proc.host)
                    self.notify_resume()
        elif not proc.runnable:  # TERM/INT wait until the process runs again
            proc.defer(self._deliver, proc, sig)
        else:
            handler = proc.handlers.get(sig)
            if handler is None:
                self.kill(proc, -SIGNAL_NUMBERS[sig], f"killed by SIG{sig}")
                return
            try:
                handler()
            except Exception:
                log.exception("signal handler of %s for SIG%s raised", proc.name, sig)

    # -- pause, resume, crash ----------------------------------------------------------

    def pause_host(self, host: SimHost) -> None:
        """Freeze every process of ``host`` (nested pauses count)."""
        self.touch()
        host.paused += 1
        for p in host.procs.values():
            p.runnable = False

    def resume_host(self, host: SimHost) -> None:
        """Undo one :meth:`pause_host`; at zero the host runs again."""
        self.touch()
        host.paused -= 1
        if host.paused > 0:
            return
        for p in host.procs.values():
            p.runnable = p.alive and not p.stopped
        self._flush(host)
        self.notify_resume()

    def _flush(self, host: SimHost) -> None:
        """Run, in the order they became due, the held continuations of processes that run
        again (right away: anything else due now comes after them)."""
        entries, host.deferred = host.deferred, []
        for proc, fn, args in entries:
            if not proc.alive:
                continue
            if proc.runnable:
                fn(*args)
            else:
                host.deferred.append((proc, fn, args))

    def crash_host(self, host: SimHost, silent: bool = False) -> None:
        """The machine dies: every process killed (-9), nothing more starts on it. With
        ``silent``, it is powered off: peers are told nothing (:attr:`SimHost.powered_off`)."""
        self.touch()
        if not host.started and not host.down:
            self.pending_starts -= 1
        host.down = True
        host.powered_off = silent
        host.closed.clear()
        host.ended.clear()
        for p in list(host.procs.values()):
            self.kill(p, -SIGNAL_NUMBERS["KILL"], "powered off" if silent else "host crashed")
        host.deferred.clear()
        self.check_end()

    def restart_host(self, host: SimHost) -> None:
        """Bring a crashed or not yet started host up with fresh processes: its first process
        starts again (a new incarnation), as a scheduler restarting a pod."""
        if not host.started and not host.down:
            self.pending_starts -= 1  # started early: its own start_at is void now
        host.down = False
        host.powered_off = False
        host.started = True
        host.deferred.clear()
        w = self.world
        name = f"{host.name}/{w.proc_name}"
        if name not in self.procs:
            self.start(host, w.proc_name, w.entry, json_copy(w.args, "world.args"), {})
        self.check_end()

    def notify_resume(self) -> None:
        """Tell stores and groups that held work may proceed now."""
        for fn in self.resume_listeners:
            fn()
