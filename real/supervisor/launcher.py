"""The local launcher: a world's hosts as OS processes on this machine.

Each host's first process is ``python -m elastic_sim.real.proc`` in a session (and process
group) of its own, so a host crash is one ``killpg``. Every process is started up front;
when all have imported torch and said READY, the launcher fixes the run's origin ``t0``
and sends ``GO <t0>``. It then injects faults on schedule and waits until every process
has exited or the time limit passes (the loop and the frame torchrun mode's launcher
shares: :mod:`.supervise`). A world with partition faults runs in a network namespace of
its own, each host at its own loopback address (:mod:`elastic_sim.real.faults.netns`);
others share this machine's loopback. Whatever happens (an exception, Ctrl-C, SIGTERM),
nothing it started, namespace included, outlives :meth:`Launcher.run`. Last, it accounts
for every process's exit and hands the merged trace to the caller.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from elastic_sim.faults.model import Fault
from elastic_sim.real.faults import netns, startfaults
from elastic_sim.real.faults.injector import Injector
from elastic_sim.real.faults.targets import HostTargets
from elastic_sim.real.supervisor import reaper, warden
from elastic_sim.real.supervisor.process import popen, wait_ready
from elastic_sim.real.supervisor.spec import ProcSpec
from elastic_sim.real.supervisor.supervise import Guard, Leader, Supervisor
from elastic_sim.real.supervisor.tail import TraceTail
from elastic_sim.real.supervisor.tracefile import TraceFile, merge
from elastic_sim.real.supervisor.workdir import RunDir, Started, stem
from elastic_sim.trace import TraceEvent, encode
from elastic_sim.world import RunResult, World

READY_TIMEOUT = 180.0
"""Seconds every host gets to start Python and import torch (8 at once on 2 cores: ~8 s)."""


_RUNS = itertools.count()
"""Tells apart the network namespaces of one launching process's runs."""


class Launcher(Supervisor):
    """Runs one world on this machine (see the module docstring)."""

    def __init__(
        self, world: World, faults: Sequence[Fault], seed: int, workdir: Path, bind: str,
        local: Sequence[str] | None = None, addresses: Mapping[str, str] | None = None,
        guard: Guard | None = None,
        watch: Callable[[TraceEvent], None] | None = None,
    ) -> None:
        run_dir = RunDir(workdir)
        super().__init__(world, TraceFile(workdir / "trace" / "launcher.jsonl"), guard,
                         TraceTail(run_dir, watch) if watch is not None else None)
        self.local = tuple(world.host_names if local is None else local)
        """The hosts whose processes this launcher starts (a cluster node: its share)."""
        self.addresses = dict(addresses or {})
        """Host name -> network address, where hosts are on other machines (cluster mode)."""
        self.faults = list(faults)
        self.seed = seed
        self.bind = bind
        self.run_dir = run_dir
        if netns.needs_cut(self.faults):
            self.netns = netns.Namespace(world.host_names, str(next(_RUNS)))
        self.targets = HostTargets(self.leaders, HostGroups(self.leaders, run_dir), self.netns,
                                   start_dir=run_dir.root.resolve())
        """What the injector (or, on a cluster node, the coordinator) acts on."""

    def run(self, emit: Callable[[TraceEvent], None]) -> RunResult:
        """Run the world; emit the merged trace; report exits and faults."""
        clean_leftovers(self.run_dir.marker)
        self.run_dir.prepare()
        injector = self._injector()
        ward = warden.start(self.run_dir.marker,
                            self.netns.name if self.netns is not None else None)
        try:
            hung = self._supervised(injector)
        finally:
            warden.dismiss(ward)
        end = self.world.time_limit if hung and self.stopped is None else self._now()
        exit_codes, end = self._account(injector, hung, end)
        digest, count = hashlib.sha256(), 0
        for ev in merge(self.run_dir.traces()):
            emit(ev)
            digest.update((encode(ev) + "\n").encode())
            count += 1
        return RunResult(
            exit_codes=exit_codes,
            end_time=end,
            hung=hung,
            faults=injector.reports(end),
            trace_sha256=digest.hexdigest(),
            trace_events=count,
            stopped="" if self.stopped is None else self.stopped[0],
        )

    def _injector(self) -> Injector:
        """What fires the run's faults (a cluster node takes its commands instead)."""
        return Injector(self.faults, self.targets, self._trace, self._now)

    # -- start -----------------------------------------------------------------------------

    def _start(self) -> None:
        cut = self.netns
        addresses = cut.addresses() if cut is not None else self.addresses
        for host in self.world.hosts:
            if host.name not in self.local:
                continue
            if host.start_delay > 0:  # what its processes hand the processes they start
                startfaults.add_delay(self.run_dir.root.resolve(), host.name,
                                      host.start_delay)
            name = f"{host.name}/{self.world.proc_name}"
            spec = ProcSpec(
                name=name,
                host=host.name,
                entry=self.world.entry,
                args=dict(self.world.args),
                workdir=str(self.run_dir.root.resolve()),
                seed=self.seed,
                bind=addresses.get(host.name, self.bind),
                parent_pid=os.getpid(),
                clock_offset=host.clock_offset,
                clock_drift=host.clock_drift,
                start_at=host.start_at,
                env={startfaults.DELAY: repr(host.start_delay)} if host.start_delay > 0 else {},
                sys_path=tuple(sys.path),
                hosts=self.world.host_names,
                addresses=addresses,
                device=self.world.device,
            )
            proc = popen(
                spec, self.run_dir, new_session=True, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, prefix=cut.prefix() if cut is not None else (),
                group=cut.gid(host.name) if cut is not None else None,
            )
            self.leaders[host.name] = Leader(host.name, name, proc)
            self.run_dir.note_started(
                Started(name, host.name, proc.pid, os.getpid(), reaper.start_time(proc.pid))
            )

    def _wait_ready(self) -> None:
        """Wait for every host's READY line (each has imported torch)."""
        wait_ready([(h, h.proc) for h in self.leaders.values()], READY_TIMEOUT, self._died_early,
                   lambda late: f"not ready after {READY_TIMEOUT:.0f}s: "
                                + ", ".join(h.name for h in late))

    def _died_early(self, host: Leader) -> str:
        """Why ``host`` could not start, in one line: its exit code and the last line its
        log holds (the error it died of). The log itself goes with the run directory."""
        code = host.proc.wait()
        log = self.run_dir.log(host.name)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()),
                    "its log is empty")
        return f"{host.name} exited with code {code} before it was ready: {last}"

    # -- supervise -------------------------------------------------------------------------

    def _reap(self, now: float) -> None:
        reaper.reap(self._adopted())

    def _adopted(self) -> list[tuple[int, int]]:
        """(pid, start time) of the run's processes other than the hosts' first ones:
        orphans are reparented to the launcher while a run lasts."""
        own = {h.proc.pid for h in self.leaders.values()}
        return [(s.pid, s.start) for s in self.run_dir.started() if s.pid not in own]

    def _job_over(self) -> bool:
        daemons = self.run_dir.daemons()
        if not daemons:
            return False
        left = [h for h in self.leaders.values() if h.exit_t is None]
        if not left or any(stem(h.name) not in daemons for h in left):
            return False
        own = {h.proc.pid for h in self.leaders.values()}
        marker = self.run_dir.marker
        return not any(reaper.is_running(s.pid, marker) for s in self.run_dir.started()
                       if s.pid not in own)

    # -- end -------------------------------------------------------------------------------

    def _kill_everything(self) -> None:
        leaders = [h.proc for h in self.leaders.values()]
        if not reaper.kill_run(self.run_dir.marker, leaders, self._adopted, timeout=10.0):
            left = [e.pid for e in reaper.scan(self.run_dir.marker)]
            print(
                f"real: processes of {self.run_dir.root} survived SIGKILL: {left}", file=sys.stderr
            )
        self._close_pipes()

    def _account(self, injector: Injector, hung: bool, end: float) -> tuple[dict[str, int], float]:
        """Every started process's exit code; write ``proc_exit`` for those that could not
        (killed). Returns the codes and the run time of the last exit."""
        recorded = {
            ev.get("pid"): ev for ev in merge(self.run_dir.traces()) if ev.kind == "proc_exit"
        }
        leaders = {h.proc.pid: h for h in self.leaders.values()}
        daemons = self.run_dir.daemons()
        exit_t: dict[int, float] = {}
        codes: dict[str, int] = {}
        for s in self.run_dir.started():
            leader = leaders.get(s.pid)
            ev = recorded.get(s.pid)
            if (ev is None and leader is not None and leader.exit_t is None and not hung
                    and stem(s.name) in daemons):
                continue  # a daemon still running when the job was over: no exit to tell
            if ev is not None:
                code, t = int(ev.get("code")), ev.t
            else:
                code = -9 if leader is None else int(leader.proc.returncode)
                t, reason = self._why_ended(s, leader, code, injector, hung, exit_t, end)
                data = {"code": code, "reason": reason, "pid": s.pid}
                self._trace.event(t, s.host, s.name, "proc_exit", data)
            if leader is not None:  # waitpid is the authority on a host's first process
                code = int(leader.proc.returncode)
                t = max(t, leader.exit_t if leader.exit_t is not None else t)
            exit_t[s.pid] = t
            codes[s.name] = code
        last = max(exit_t.values(), default=0.0)
        return codes, end if hung else last

    def _why_ended(
        self,
        s: Started,
        leader: Leader | None,
        code: int,
        injector: Injector,
        hung: bool,
        exit_t: dict[int, float],
        end: float,
    ) -> tuple[float, str]:
        """When and why a process that wrote no ``proc_exit`` ended."""
        kill = injector.proc_kills.get(s.name) or injector.host_kills.get(s.host)
        if kill is not None:
            return kill.t, f"killed by fault {kill.fault_id}"
        if hung:
            return end, "killed at the time limit"
        if leader is not None:
            t = leader.exit_t if leader.exit_t is not None else end
            if code < 0:
                return t, f"signal {signal.Signals(-code).name.removeprefix('SIG')}"
            return t, f"exited with code {code} without a proc_exit"
        if s.parent_pid in exit_t:
            return exit_t[s.parent_pid], "parent exited"
        return end, "killed at the end of the run"


class HostGroups:
    """Real mode's hosts' processes, for :class:`~elastic_sim.real.faults.targets.HostTargets`:
    a host's first process leads a process group that the processes it starts stay in, and
    every process's pid is in the run directory."""

    def __init__(self, leaders: Mapping[str, Leader], run_dir: RunDir) -> None:
        self.leaders = leaders
        self.run_dir = run_dir

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every process of ``host``'s group; False if none is left."""
        leader = self.leaders[host].proc
        if leader.poll() is None:  # unreaped leader: its group id cannot be recycled
            return reaper.signal_quietly(leader.pid, sig, group=True)
        members = [e.pid for e in reaper.scan(self.run_dir.marker) if e.pgid == leader.pid]
        for pid in members:
            reaper.signal_quietly(pid, sig)
        return bool(members)

    def find(self, name: str) -> tuple[int | None, str]:
        """The pid of live process ``name``, from its pid file."""
        pid = self.run_dir.read_pid(name)
        if pid is None:
            return None, f"process {name} was never started"
        if not reaper.is_running(pid, self.run_dir.marker):
            return None, f"process {name} had already exited"
        return pid, ""

    def workers(self, host: str) -> list[int]:
        """The live processes ``host``'s first process started (and theirs)."""
        leader = self.leaders[host].proc.pid
        return [s.pid for s in self.run_dir.started()
                if s.host == host and s.pid != leader
                and reaper.is_running(s.pid, self.run_dir.marker)]


def clean_leftovers(marker: str) -> None:
    """Before a run: what earlier runs left because their launcher and its warden were
    both killed: network namespaces of dead launchers, and processes of an earlier run in
    the same directory."""
    if not netns.missing():
        netns.sweep_stale()
    for entry in reaper.scan(marker):
        reaper.kill_hard(entry.pid)
