"""The world a run happens in: hosts, links, the job's first process on each host, and
what a runtime reports back. Plain data, so both runtimes read the same description."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

HOST_NAME_PATTERN = (r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                     r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
"""What a host's name may be: a DNS name (RFC 1123), one or more dot-separated labels of 1
to 63 letters, digits and hyphens, neither starting nor ending with a hyphen, at most 253
characters in all (``h0``, ``node-3``, ``127.0.0.1``, as Horovod's own tests name hosts).
It becomes a path component, a command-line argument, a network namespace's part and an
HTML cell, and ``*`` is a fault's wildcard, so nothing else is taken."""
_HOST_NAME = re.compile(HOST_NAME_PATTERN)


def host_name_problem(name: object) -> str:
    """Why ``name`` cannot name a host ("" when it can)."""
    if isinstance(name, str) and _HOST_NAME.fullmatch(name):
        return ""
    return ("expected a host name: dot-separated labels of 1 to 63 letters, digits and "
            "hyphens (not starting or ending with a hyphen), at most 253 characters (a DNS "
            "name, such as h0 or node-3)")


@dataclass(frozen=True)
class HostSpec:
    """One machine of the cluster."""

    name: str
    start_at: float = 0.0
    """When its first process starts (a late host is a scale-up)."""
    clock_offset: float = 0.0
    """Seconds its wall clock is ahead of true time."""
    clock_drift: float = 0.0
    """Relative rate error of its clocks (1e-6 = 1 ppm fast)."""
    start_delay: float = 0.0
    """Extra seconds every process started on it takes before its entry runs, its first
    one (from ``start_at``) included: a slow disk, a cold image, a loaded node (a
    ``slow_start`` fault from time 0 delays the processes started after it only)."""


WAKE_LATENCY = 0.0001
"""How late a sleep wakes: on these machines ``time.sleep`` of 1 ms to 0.5 s overshot by 63
to 157 us (medians). Upstream code relies on it without saying so: torchelastic's executor
sleeps exactly its state cache's lifetime (1 s) and must find the cache expired, as real
elapsed time always exceeds the sleep. With sleeps of exactly their length, 98% of those
polls hit the cache and a waiting agent polled every 2 s instead of every 1 s."""


PROCESS_EXIT = 0.15
"""Seconds from a process's main returning (or raising) to the process being gone: the
interpreter's teardown, during which what it hosts (a store) still answers. Measured on
these machines (``benchmarks/calibrate_costs.py``; 2 vCPU, load 3-6, torch 2.13): a
Python process that imported ``torch.distributed`` and hosts a ``TCPStore`` (a torchrun
agent with ``is_host``) closed its store's connections 0.11 to 0.25 s after its last
statement, median 0.15 s, p90 0.25 s (8 trials); its exit status was visible to its parent
only after 0.6 to 1.6 s (median 0.9 s). The sim ends the process, store and exit status at
once, at the store's figure: the race it decides (the store host's agent leaving after the
exit barrier while the others still close the rendezvous) is won by the others upstream
unless they are that much slower. A process killed by a signal or a crash pays nothing."""


@dataclass(frozen=True)
class LinkSpec:
    """A network link between two nodes of the topology (hosts or switches)."""

    a: str
    b: str
    latency: float
    """One-way seconds."""
    bandwidth: float
    """Bytes per second."""


@dataclass(frozen=True)
class CollectiveModel:
    """How the sim prices and fails collectives; defaults from shared/calibration.md
    (Gloo on loopback, torch 2.13)."""

    alpha: float = 0.00015
    """Software cost of one algorithm step, on top of the link latency (s)."""
    detect_fast_max: float = 0.17
    """A dead peer is usually noticed within uniform(0, this) seconds..."""
    detect_slow_prob: float = 1 / 22
    """...but with this probability only at the group's timeout."""


NCCL = CollectiveModel(alpha=0.00002, detect_fast_max=0.0, detect_slow_prob=1.0)
"""NCCL's profile, ESTIMATED (no GPU measurement on these machines yet): a dead or
powered-off peer is not seen by a pending collective, which waits for the group's timeout
(the watchdog then aborts it, ``TORCH_NCCL_ASYNC_ERROR_HANDLING``); the software cost of a
step is below Gloo's. Replace with measurements from a GPU machine."""


@dataclass(frozen=True)
class World:
    """Everything a runtime needs to run a job: the cluster, and what runs on it.

    Every host starts one process ``host/proc_name`` running ``entry`` with ``args``."""

    hosts: tuple[HostSpec, ...]
    entry: str
    args: Mapping[str, Any]
    proc_name: str = "main"
    topology: Literal["full", "star"] = "star"
    latency: float = 0.00005
    bandwidth: float = 3.0e9
    links: tuple[LinkSpec, ...] = ()
    """Per-link overrides of the default latency and bandwidth."""
    collectives: CollectiveModel = field(default_factory=CollectiveModel)
    process_start: float = 0.0
    """Seconds a child process started at run time (``Runtime.start_process``) takes before
    its entry runs: interpreter start plus imports. The sim charges it; real processes pay
    their own. Hosts' first processes start at their ``start_at`` without it."""
    wake_latency: float = WAKE_LATENCY
    """Seconds a sleeping process wakes after its sleep was due, charged on every
    ``Runtime.sleep`` of a positive duration."""
    process_exit: float = 0.0
    """Seconds a process takes to exit after its main returns: interpreter teardown, what
    it hosts (a store) answering until then. The sim charges it (a scenario's default is
    :data:`PROCESS_EXIT`); real processes pay their own."""
    fidelity: Literal["fast", "fine"] = "fast"
    """Sim only: ``fast`` runs lockstep training stretches as one event each
    (:mod:`elastic_sim.sim.stretch`), ``fine`` simulates every step of every worker."""
    time_limit: float = 3600.0
    """Run time after which a run that has not ended is stopped and called hung."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where real mode puts training tensors: Gloo groups on the CPU, or NCCL groups on
    GPUs (one per worker)."""

    def host(self, name: str) -> HostSpec:
        """The host named ``name``; KeyError if there is none."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    @property
    def host_names(self) -> tuple[str, ...]:
        """Host names in scenario order."""
        return tuple(h.name for h in self.hosts)


@dataclass
class FaultReport:
    """Whether one scheduled fault fired, and when or why not."""

    id: str
    type: str
    fired: bool
    at: float | None = None
    reason: str = ""


@dataclass
class RunResult:
    """What a runtime reports when a run ends (the trace holds the rest)."""

    exit_codes: dict[str, int]
    """Exit code of every process the run started (negative: killed by that signal)."""
    end_time: float
    """Run time at which the last process ended (or the time limit)."""
    hung: bool
    """The time limit passed with processes still running."""
    faults: list[FaultReport] = field(default_factory=list)
    trace_sha256: str = ""
    trace_events: int = 0
    stopped: str = ""
    """Why the run was ended before its end ("" if it was not): ``livelock`` (the sim's
    time stopped advancing), ``wall_limit`` or ``memory_limit`` (a guard of the tool)."""
