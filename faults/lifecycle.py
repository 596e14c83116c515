"""Fault types on a host's processes over their life: crash_restart, straggler, preempt,
signal, power_off, wedge, gpu_wedge, crash_loop (with :class:`CrashAtStart`) and
slow_start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from elastic_sim.faults.base import Duration, Fault, Healing, HostName, OnHost, Time


@dataclass(frozen=True)
class CrashRestart(OnHost, Fault, tag="crash_restart"):
    """The host crashes, and after ``downtime`` comes back with fresh processes (as a
    scheduler restarts a pod): its first process starts again, a new incarnation."""

    host: HostName
    downtime: Time

    @property
    def heals_at(self) -> float | None:
        return self.at + self.downtime


@dataclass(frozen=True)
class Straggler(OnHost, Healing, Fault, tag="straggler"):
    """The host computes ``factor`` times slower (its sleeps, which model compute, last
    ``factor`` times longer) for ``duration`` seconds."""

    host: HostName
    factor: Annotated[float, Field(ge=1, allow_inf_nan=False)]
    duration: Duration


@dataclass(frozen=True)
class Preempt(OnHost, Fault, tag="preempt"):
    """Preemption with notice: SIGTERM to every process of the host, SIGKILL to what is left
    after ``grace`` seconds; the host is then gone."""

    host: HostName
    grace: Time = 30.0
    ends_host: ClassVar[bool] = True
    tells_to_leave: ClassVar[bool] = True


@dataclass(frozen=True)
class Signal(OnHost, Fault, tag="signal"):
    """A named signal delivered to the host's agent or driver (``to: agent``, the host's
    first process) or to each of its workers (``to: workers``, every other process there).
    The protocol reacts as upstream's handlers do (torchrun: SIGTERM, SIGINT, SIGHUP and
    SIGQUIT raise SignalException once workers exist; SIGINT before that is a
    KeyboardInterrupt that closes the rendezvous); an unhandled one ends the process."""

    host: HostName
    signal: Literal["INT", "TERM", "HUP", "QUIT", "USR1", "USR2"]
    to: Literal["agent", "workers"] = "agent"
    tells_to_leave: ClassVar[bool] = True


@dataclass(frozen=True)
class PowerOff(OnHost, Fault, tag="power_off"):
    """The machine stops dead: every process ends, and no FIN or RST ever leaves it. Peers
    are not told: their collectives and store calls with it wait for their own timeouts
    (the NCCL case, a powered-off Gloo peer), where a ``crash`` is seen at once."""

    host: HostName
    ends_host: ClassVar[bool] = True


@dataclass(frozen=True)
class Wedge(OnHost, Healing, Fault, tag="wedge"):
    """One activity of a process is stuck for ``duration`` seconds while the process and
    its other activities go on: an agent's main loop stuck while its heartbeat keeps
    beating, a worker stuck inside a collective while its process lives. Activities are
    the names a protocol gives its tasks (torchrun's agent: ``agent.invoke_run``,
    ``keep-alive``; every process: ``main``); ``proc`` (``host/name``) picks one process,
    default every process of the host that has the activity."""

    host: HostName
    activity: Annotated[str, Field(min_length=1)]
    duration: Duration
    proc: str = ""

    def problem(self) -> tuple[str, str] | None:
        return proc_of_host_problem(self.host, self.proc)


@dataclass(frozen=True)
class GpuWedge(OnHost, Fault, tag="gpu_wedge"):
    """The host's GPU work wedges for good (a kernel that never ends, a CUDA call that
    never returns): every CUDA and NCCL call of its processes that have a process group on
    the GPUs (``cluster.device: cuda``) blocks, their NCCL watchdog thread's included. Such
    a process makes no progress, its peers' collectives time out, and its own watchdog,
    stuck too, never tears it down: NCCL's heartbeat monitor aborts it (SIGABRT) once it
    finds the watchdog's beat stopped, or a signal ends it. ``proc`` (``host/name``) picks
    one process, default every such process of the host; processes started on the host
    afterwards get a GPU that works (the wedge holds the processes it caught)."""

    host: HostName
    proc: str = ""
    device: ClassVar[str] = "cuda"

    def problem(self) -> tuple[str, str] | None:
        return proc_of_host_problem(self.host, self.proc)


def proc_of_host_problem(host: str, proc: str) -> tuple[str, str] | None:
    """A fault's ``proc`` that is given but not a process of its ``host``: (field, what was
    expected), else None."""
    if proc and proc.partition("/")[0] != host:
        return "proc", f"expected a process of {host} ('{host}/name'), got {proc!r}"
    return None


class CrashAtStart(Exception):
    """A process failing during its start-up (a crash loop): exit code 1."""


@dataclass(frozen=True)
class CrashLoop(OnHost, Fault, tag="crash_loop"):
    """The bad node: from ``at`` on, every process started on ``host`` (``to``: its
    ``workers``, its ``agent`` when it is started again, or ``any``) fails at start-up,
    exit code 1 once its interpreter has started, on each of the next ``starts`` starts
    (None: every start, for good)."""

    host: HostName
    to: Literal["workers", "agent", "any"] = "workers"
    starts: Annotated[int, Field(ge=1)] | None = None

    def hits(self, is_agent: bool) -> bool:
        """Whether a process of this kind (the host's first one, or not) is affected."""
        return self.to == "any" or (self.to == "agent") == is_agent


@dataclass(frozen=True)
class SlowStart(OnHost, Fault, tag="slow_start"):
    """From ``at`` on, every process started on ``host`` takes ``delay`` seconds longer to
    start (a slow disk, a cold container image, a loaded node): a worker joins its group
    that much later, an agent started again reaches its rendezvous that much later."""

    host: HostName
    delay: Duration
