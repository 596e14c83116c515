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
    default_timeout: float = 1800.0
    """The group timeout (s) where the program sets none: Gloo's 30 min. torch 2.13:
    ``kProcessGroupDefaultTimeout`` (30 * 60 * 1000 ms) in
    ``torch/include/torch/csrc/distributed/c10d/ProcessGroup.hpp``, exposed as
    ``torch.distributed.constants.default_pg_timeout``, which
    ``distributed_c10d._get_default_timeout`` gives every backend but NCCL."""
    tears_down: bool = False
    """Whether the backend's watchdog ends a process whose collective failed or timed out,
    instead of the error reaching the caller, in a process whose environment asks for it
    (:data:`ASYNC_ERROR_HANDLING`): NCCL's does, Gloo raises in the caller."""
    heartbeat_timeout: float = 0.0
    """Seconds the backend's heartbeat monitor waits after a debug-dump signal before it
    ends a process that is still there (0: no monitor, Gloo's); see
    :mod:`elastic_sim.sim.heartbeat`."""
    monitoring: bool = False
    """Whether the heartbeat monitor then aborts the process (SIGABRT); off, it only logs."""
    dump_delay: float = 0.0
    """Seconds from the watchdog seeing a collective's timeout to its debug-dump signal (it
    first collects the failed collective's stack trace)."""


ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
"""The variable that tells torch's NCCL watchdog what to do on an error or a timeout
(``ErrorHandlingMode`` in torch 2.13's
``torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp``): 0 nothing, 1 abort the
communicators and tear the process down, 2 only abort them, 3 tear down without aborting
(``SHOULD_TEAR_DOWN``: 1 and 3). torchrun's agent sets 1 for every worker
(``torch/distributed/elastic/agent/server/local_elastic_agent.py``). The model tears down
only processes that carry the variable: those of torchrun's workers, which use c10d's
``ProcessGroupNCCL``; the other protocols' processes (Horovod's own NCCL operations,
torchft's wrappers, the static protocol) see the error raised."""

TEAR_DOWN_MODES = frozenset({"1", "3"})
"""Values of :data:`ASYNC_ERROR_HANDLING` that tear the process down."""

WATCHDOG_ABORT_CODE = -6
"""A process the watchdog tore down: the exception it rethrows on its own thread is never
caught, so the C++ runtime aborts (SIGABRT; an exit code reads as -6, as waitpid gives)."""


# torch 2.13's NCCL defaults, each read in the installed wheel's source:
# - the 10-minute default timeout: kProcessGroupNCCLDefaultTimeout (10 * 60 * 1000 ms) in
#   torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp, exposed as
#   torch.distributed.constants.default_pg_nccl_timeout and chosen for Backend.NCCL by
#   _get_default_timeout in torch/distributed/distributed_c10d.py;
# - teardown on error: torchrun's agent gives every worker TORCH_NCCL_ASYNC_ERROR_HANDLING=1
#   unless set (torch/distributed/elastic/agent/server/local_elastic_agent.py), and mode 1
#   is TearDown ("tear down process upon error", ErrorHandlingMode in ProcessGroupNCCL.hpp);
# - the heartbeat monitor (class HeartbeatMonitor in ProcessGroupNCCL.hpp): monitoring on,
#   TORCH_NCCL_ENABLE_MONITORING (ProcessGroupNCCL.hpp; its default, true, is read in the
#   HeartbeatMonitor constructor in ProcessGroupNCCL.cpp, which the wheel does not ship:
#   upstream's source, not pinned to 2.13), and heartbeat_timeout 480 s,
#   TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (ProcessGroupNCCL.hpp; default 60 * 8 s in the same
#   constructor). On a debug-dump signal (a collective's timeout) it dumps, waits that long
#   and ends the process if it is still there.
# Measured on one H200 (torch 2.11.0+cu130, NCCL 2.28.9; benchmarks/results/README.md, "NCCL
# on a GPU"): the 600 s default and the watchdog seeing a timeout within 0.1 s agree with
# this profile; behind a kernel that never ends the watchdog still sees its collective's
# timeout, signals the dump 4.4-6.5 s later (dump_delay 5 s: it collects the failed
# collective's stack trace first; public logs of runs without the flight recorder show
# 0-0.3 s), cannot tear the process down while the kernel runs, and the heartbeat monitor
# ends the process (SIGABRT) TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (5 s there) after the signal:
# the gpu_wedge path (elastic_sim.sim.heartbeat). Not modelled: the monitor's periodic
# check of the watchdog's beat (a watchdog stuck in the blocked teardown fails it only
# after the dump path has ended the process), the dump signal a peer writes to the store,
# and the wait for the dump before an ordinary teardown (0.9 s to about 60 s in public
# logs). A peer's death (two GPUs) is not measured.
NCCL = CollectiveModel(alpha=0.00002, detect_fast_max=0.0, detect_slow_prob=1.0,
                       default_timeout=600.0, tears_down=True, heartbeat_timeout=480.0,
                       monitoring=True, dump_delay=5.0)
"""NCCL's profile, partly measured (one GPU; the comment above): a dead or
powered-off peer is not seen by a pending collective, which waits for the group's timeout
(by default NCCL's 10 min, not Gloo's 30: see the comment above); the watchdog then tears
the process down (:data:`ASYNC_ERROR_HANDLING`) as it sees the timeout (upstream's C++
may first wait for a debug dump, a delay not modelled); a process whose teardown is
blocked (a wedged GPU) is ended by the heartbeat monitor instead, after the dump signal;
the software cost of a step is below Gloo's. The timeout and the wedged path are measured
on one GPU (the comment above); a peer's death needs two."""

GLOO = CollectiveModel()
"""Gloo's profile (measured: shared/calibration.md)."""


def collective_model(device: str) -> CollectiveModel:
    """The profile of the groups a ``cluster.device`` gets: Gloo on the CPU, NCCL on GPUs."""
    return NCCL if device == "cuda" else GLOO


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
