"""What real mode's injector acts on: the fault targets (:class:`Targets`), and their one
implementation for the launchers that run hosts' processes on this machine
(:class:`HostTargets`: the local launcher, torchrun mode's, and a cluster node's of
either mode, to which the coordinator forwards its faults).

Those launchers differ in a few things only, and they are what :class:`HostTargets` is
given: how a host's processes are found and signalled all at once and how a named
process maps to a pid (:class:`Processes`: a process group and the run directory's pid
files, or torchrun mode's environment marker), the run's network namespace (cuts, link
shaping, connection resets; a run without one refuses them), and where start-up faults
are handed to the processes a host starts (torchrun mode has nowhere: upstream's agent
starts its workers).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from elastic_sim.faults.model import (
    ConnReset,
    CrashLoop,
    LinkFault,
    OneWayPartition,
    Partition,
    PowerOff,
    SlowStart,
)
from elastic_sim.real.faults import netns, startfaults
from elastic_sim.real.supervisor import reaper
from elastic_sim.real.supervisor.supervise import Leader

Cut = Partition | OneWayPartition | PowerOff | LinkFault
"""A fault that cuts (a link fault: shapes) the network from when it fires."""
Healed = Partition | OneWayPartition | LinkFault
"""A cut that is lifted again (a power-off is for good)."""
StartFault = CrashLoop | SlowStart
"""A fault the processes a host starts meet at their start."""


class Targets(Protocol):
    """What the injector signals: the launcher's view of the run's processes."""

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every process of ``host``; False if none is left."""

    def signal_proc(self, name: str, sig: int) -> str:
        """Signal process ``name``; "" if done, else why not."""

    def start_fault(self, fault: StartFault) -> str:
        """Make processes started on the fault's host from now on fail at start-up or
        start late (:mod:`elastic_sim.real.faults.startfaults`); "" if done, else why not."""

    def signal_role(self, host: str, to: str, sig: int) -> str:
        """Signal ``host``'s first process (``to`` "agent") or every other process of it
        ("workers"); "" if done, else why not."""

    def cut(self, fault: Cut) -> str:
        """Start dropping the packets ``fault`` cuts (a link fault: shaping them); "" if
        done, else why not."""

    def heal(self, fault: Healed) -> str:
        """Stop dropping (shaping) them; "" if done, else why not."""

    def reset(self, fault: ConnReset) -> tuple[str, int]:
        """Reset the established connections between the fault's hosts; ("" if done, else
        why not; how many)."""


class Processes(Protocol):
    """How a launcher finds its hosts' processes other than their first ones (what
    :class:`HostTargets` is parametrised by)."""

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every live process of ``host`` at once; False if none is left."""

    def find(self, name: str) -> tuple[int | None, str]:
        """The pid of live process ``name`` (not a host's first process), or (None, why
        not)."""

    def workers(self, host: str) -> list[int]:
        """The pids of ``host``'s live processes other than its first one."""


class HostTargets:
    """The fault targets of a launcher whose hosts' processes run on this machine (see
    the module docstring)."""

    def __init__(self, leaders: Mapping[str, Leader], processes: Processes,
                 namespace: netns.Namespace | None, start_dir: Path | None = None,
                 start_refused: str = "") -> None:
        self.leaders = leaders
        """The hosts' first processes (the launcher's own, filled as it starts them)."""
        self.processes = processes
        self.namespace = namespace
        """The run's network namespace (None: cuts, shaping and resets are refused)."""
        self.start_dir = start_dir
        """Where start-up faults are written for the hosts' processes (the run
        directory); None: they are refused, saying ``start_refused``."""
        self.start_refused = start_refused

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every process of ``host``; False if none is left."""
        return self.processes.signal_host(host, sig)

    def signal_proc(self, name: str, sig: int) -> str:
        """Signal process ``name`` (a host's first process, or one it started); "" if
        done, else why not."""
        leader = self.leaders.get(name.partition("/")[0])
        if leader is not None and leader.name == name:
            if leader.proc.poll() is not None:
                return f"process {name} had already exited"
            leader.proc.send_signal(sig)
            return ""
        pid, why = self.processes.find(name)
        if pid is None:
            return why
        return "" if reaper.signal_quietly(pid, sig) else f"process {name} had already exited"

    def signal_role(self, host: str, to: str, sig: int) -> str:
        """Signal ``host``'s first process (``to`` "agent") or every other process of it
        that still runs ("workers"); "" if done, else why not."""
        leader = self.leaders.get(host)
        if leader is None:
            return f"no host {host}"
        if to == "agent":
            return self.signal_proc(leader.name, sig)
        hit = [pid for pid in self.processes.workers(host) if reaper.signal_quietly(pid, sig)]
        return "" if hit else f"no worker process running on {host}"

    def start_fault(self, fault: StartFault) -> str:
        """Tell ``fault.host``'s processes what the processes they start from now on meet
        (:mod:`elastic_sim.real.faults.startfaults`); "" if done, else why not."""
        if self.start_dir is None:
            return f"{fault.type}: {self.start_refused}"
        if self.leaders[fault.host].proc.poll() is not None:
            return f"host {fault.host}: its first process had already exited"
        if isinstance(fault, CrashLoop):
            startfaults.add_loop(self.start_dir, fault.host, fault.id, fault.to, fault.starts)
        else:
            startfaults.add_delay(self.start_dir, fault.host, fault.delay)
        return ""

    def cut(self, fault: Cut) -> str:
        """Start dropping the packets ``fault`` cuts in the run's namespace (a link fault:
        shaping them); "" if done, else why not."""
        return netns.cut_or_heal(self.namespace, fault, heal=False)

    def heal(self, fault: Healed) -> str:
        """Stop dropping (shaping) them; "" if done, else why not."""
        return netns.cut_or_heal(self.namespace, fault, heal=True)

    def reset(self, fault: ConnReset) -> tuple[str, int]:
        """Reset the established connections between the fault's hosts in the run's
        namespace; ("" if done, else why not; how many)."""
        return netns.reset_between(self.namespace, fault)
