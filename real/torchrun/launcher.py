"""Starts one ``torchrun`` agent per host, injects the scenario's faults with real mode's
injector, and leaves nothing behind.

Each agent (:mod:`.agent`) is started in a session of its own with a marker in its
environment, ``ELASTIC_SIM_MARK=<run>:<host>``, which torchrun's workers (started by
upstream in sessions of their own) and anything they start inherit: a host's processes
are the live processes carrying its marker, found by a scan of ``/proc/*/environ``. A host
fault signals all of them (as real mode signals a host's process group); a process fault
signals the newest live worker of that local rank (``hN/wK``) or the agent (``hN/main``).

The run gets a private network namespace when the machine allows it (see
:func:`isolation`), as real mode's partitioned runs do. Every agent imports torch and says
READY (on a pipe of its own, not its stdout, which its workers inherit: their output goes
to files under the run directory, :mod:`.logs`); the run's origin ``t0`` is fixed when all
have, and each gets ``GO`` at its host's start time. Whatever happens (an exception,
Ctrl-C, SIGTERM), every marked process is SIGKILLed and reaped before :meth:`run` returns
(the launcher is a subreaper while the run lasts, so orphaned workers are its to reap),
and the namespace is deleted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elastic_sim.faults.model import Fault
from elastic_sim.real.faults import netns
from elastic_sim.real.faults.injector import Injector
from elastic_sim.real.faults.targets import HostTargets
from elastic_sim.real.supervisor import reaper, warden
from elastic_sim.real.supervisor.process import wait_ready
from elastic_sim.real.supervisor.supervise import Handshake, Leader, Supervisor
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.real.torchrun import logs
from elastic_sim.real.torchrun.flags import Command
from elastic_sim.world import World

MARK = "ELASTIC_SIM_MARK"
READY_TIMEOUT = 180.0
"""Seconds every agent gets to start Python and import torch."""
KILL_TIMEOUT = 15.0
"""Seconds the launcher keeps killing and reaping marked processes before it gives up."""
AGENT = "main"
"""The process name of a host's agent (``hN/main``)."""
NO_START_FAULTS = ("torchrun mode starts workers through upstream's agent, which cannot be "
                   "made to fail or slow its starts; use --mode real")
"""Why start-up faults are refused when due: they need the project's own process entry."""


@dataclass
class Outcome:
    """What the launcher saw: t0, agents' exits, whether it hit the time limit."""

    t0: float
    end: float
    hung: bool
    agent_codes: dict[str, int] = field(default_factory=dict)
    agent_exit_t: dict[str, float] = field(default_factory=dict)


def isolation() -> str:
    """Why the run cannot have a private network namespace ("" when it can).

    torch's TCPStore servers, which torchrun itself creates (the rendezvous store and the
    agent store), listen on every interface whatever address they are given; in a
    namespace of its own, whose only interface is a loopback, the run is unreachable from
    outside. Without one (no root, ``ip`` or ``nft``), they listen on this machine's
    interfaces while the run lasts."""
    return netns.missing()


def marked(marker: str) -> list[tuple[int, str]]:
    """(pid, the mark's host) of every live, non-zombie process carrying the run's mark."""
    return reaper.scan_env(f"{MARK}={marker}:".encode())


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return {}
    return dict(v.decode(errors="replace").partition("=")[::2] for v in raw if b"=" in v)


class MarkedProcesses:
    """torchrun mode's hosts' processes, for
    :class:`~elastic_sim.real.faults.targets.HostTargets`: whatever carries the host's mark
    in its environment (agents and upstream's workers start sessions of their own, so no
    process group holds them); ``hN/wK`` is the newest live worker of local rank K."""

    def __init__(self, leaders: Mapping[str, Leader], marker: str) -> None:
        self.leaders = leaders
        self.marker = marker

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every live process of ``host``; False if none is left."""
        pids = [pid for pid, h in marked(self.marker) if h == host]
        return sum(reaper.signal_quietly(pid, sig) for pid in pids) > 0

    def find(self, name: str) -> tuple[int | None, str]:
        """The pid of ``hN/wK``, the newest live worker of local rank K on host hN."""
        host, _, proc = name.partition("/")
        agent = self.leaders.get(host)
        if agent is None:
            return None, f"no host {host}"
        if not proc.startswith("w") or not proc[1:].isdigit():
            return None, f"process {name}: torchrun mode knows hN/{AGENT} and hN/wK only"
        live = [pid for pid, h in marked(self.marker)
                if h == host and _environ(pid).get("LOCAL_RANK") == proc[1:]
                and pid != agent.proc.pid]
        if not live:
            return None, f"process {name} is not running"
        return max(live, key=reaper.start_time), ""

    def workers(self, host: str) -> list[int]:
        """Every live process of ``host`` but its agent."""
        agent = self.leaders[host].proc.pid
        return [pid for pid, h in marked(self.marker) if h == host and pid != agent]


class Launcher(Supervisor):
    """Runs a world's hosts as torchrun agents (see the module docstring)."""

    TICK = 0.05

    def __init__(self, world: World, faults: Sequence[Fault], commands: Sequence[Command],
                 workdir: Path, private_net: bool = True) -> None:
        super().__init__(world, TraceFile(workdir / "launcher.jsonl"))
        self.faults = list(faults)
        self.commands = list(commands)
        self.workdir = workdir
        self.marker = uuid.uuid4().hex
        self._last_reap = 0.0
        self._seen: dict[int, int] = {}
        """(pid -> start time) of every marked process seen (to reap it once orphaned)."""
        self.isolation = isolation()
        if private_net and (netns.needs_cut(self.faults) or not self.isolation):
            self.netns = netns.Namespace(world.host_names, f"tr{os.getpid()}")
        self.targets = HostTargets(self.leaders, MarkedProcesses(self.leaders, self.marker),
                                   self.netns, start_refused=NO_START_FAULTS)
        """What the injector (or, on a cluster node, the coordinator) acts on."""
        self.injector = Injector(self.faults, self.targets, self._trace, self._now)

    def stream(self, host: str) -> Path:
        """The agent's torchelastic stream file."""
        return self.workdir / f"agent-{host}.jsonl"

    def checkpoint(self, host: str) -> Path:
        """The host's checkpoint file (the bundled worker's)."""
        return self.workdir / "checkpoints" / f"{host}.json"

    def run(self) -> Outcome:
        """Start, supervise, always clean up."""
        (self.workdir / "checkpoints").mkdir(parents=True, exist_ok=True)
        (self.workdir / "workers").mkdir(exist_ok=True)
        # The warden outlives a SIGKILLed launcher and kills what carries the run's mark
        # (agents start sessions of their own and torchrun's workers are not told to die
        # with their parent).
        ward = warden.start(self.marker, None, env_mark=f"{MARK}={self.marker}:")
        try:
            hung = self._supervised(self.injector)
        finally:
            warden.dismiss(ward)
        end = self.world.time_limit if hung else self._now()
        out = Outcome(self.t0, end, hung)
        for host, a in self.leaders.items():
            out.agent_codes[host] = int(a.proc.returncode)
            out.agent_exit_t[host] = a.exit_t if a.exit_t is not None else end
        return out

    def _start(self) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIC_SIM_")}
        path = os.pathsep.join(p for p in sys.path if p)
        starts = {h.name: h.start_at for h in self.world.hosts}
        for cmd in self.commands:
            env = {**base, **cmd.env, **logs.environment(self.workdir),
                   MARK: f"{self.marker}:{cmd.host}", "PYTHONPATH": path,
                   "ELASTIC_SIM_TRACE_DIR": str((self.workdir / "workers").resolve()),
                   "ELASTIC_SIM_CHECKPOINT": str(self.checkpoint(cmd.host).resolve())}
            # READY and GO go through pipes of their own: the agent's stdout and stderr
            # are its workers' (its log file), open for as long as they run.
            ready_r, ready_w = os.pipe()
            go_r, go_w = os.pipe()
            argv = [sys.executable, "-m", "elastic_sim.real.torchrun.agent", cmd.host,
                    str(self.stream(cmd.host)), str(self.checkpoint(cmd.host)),
                    str(ready_w), str(go_r), "--",
                    *logs.torchrun_flags(self.workdir, cmd.host), *cmd.argv]
            cut = self.netns
            try:
                with (self.workdir / f"agent-{cmd.host}.log").open("ab") as log:
                    proc = subprocess.Popen(
                        [*(cut.prefix() if cut else ()), *argv], stdin=subprocess.DEVNULL,
                        stdout=log, stderr=log, env=env, start_new_session=True,
                        pass_fds=(ready_w, go_r), group=cut.gid(cmd.host) if cut else None)
            except BaseException:
                for fd in (ready_r, go_w):
                    os.close(fd)
                raise
            finally:
                for fd in (ready_w, go_r):
                    os.close(fd)
            channel = Handshake(os.fdopen(ready_r, "rb", buffering=0),
                                os.fdopen(go_w, "wb", buffering=0))
            self.leaders[cmd.host] = Leader(cmd.host, f"{cmd.host}/{AGENT}", proc,
                                            go_at=starts.get(cmd.host, 0.0), handshake=channel)

    def _wait_ready(self) -> None:
        wait_ready([(a, a.channel.ready) for a in self.leaders.values()], READY_TIMEOUT,
                   self._died_early,
                   lambda late: f"torchrun agents not ready after {READY_TIMEOUT:.0f}s: "
                                + ", ".join(a.host for a in late))

    def _died_early(self, a: Leader) -> str:
        log = self.workdir / f"agent-{a.host}.log"
        return (f"the torchrun agent of {a.host} exited before it was ready; {log}:\n"
                + log.read_text(errors="replace")[-1500:])

    def _reap(self, now: float) -> None:
        if now - self._last_reap >= 0.5:
            self._last_reap = now
            self._reap_orphans()

    def _reap_orphans(self) -> None:
        """Reap the run's exited processes that were reparented to this (subreaper)
        process: those seen carrying the mark (a zombie no longer shows its environment)."""
        for pid, _ in marked(self.marker):
            self._seen.setdefault(pid, reaper.start_time(pid))
        reaper.reap(self._seen.items())

    # -- end -------------------------------------------------------------------------------

    def _kill_everything(self) -> None:
        """SIGKILL every marked process and every agent's group; reap until none is left."""
        deadline = time.monotonic() + KILL_TIMEOUT
        while True:
            for a in self.leaders.values():
                if a.proc.poll() is None:
                    reaper.kill_hard(a.proc.pid, group=True)
            left = marked(self.marker)
            for pid, _ in left:
                reaper.kill_hard(pid)
            self._reap_orphans()
            running = [a for a in self.leaders.values() if a.proc.poll() is None]
            if not left and not running:
                break
            if time.monotonic() > deadline:
                print(f"torchrun mode: processes survived SIGKILL: {[p for p, _ in left]}",
                      file=sys.stderr)
                break
            time.sleep(0.02)
        self._close_pipes()
