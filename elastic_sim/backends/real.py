"""``--mode real``: the protocols as OS processes on this machine or a cluster's nodes, over
TCP, a real TCPStore and Gloo (NCCL on GPUs), faults injected for real
(:mod:`elastic_sim.real`)."""

from __future__ import annotations

import importlib.util
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from elastic_sim.backends.base import Backend, FaultTable, Progress, Refused
from elastic_sim.faults.model import Fault
from elastic_sim.modes import MODES
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

if TYPE_CHECKING:
    from elastic_sim.guards import RunGuard
    from elastic_sim.scenario import Scenario
    from elastic_sim.spec import RunSpec

TORCH_INSTALL = "pip install torch==2.13.0 (or: pip install 'elastic-sim[real]')"
"""How a user gets what real and torchrun mode import in their processes."""


def free_port() -> int:
    """A TCP port nothing listens on now (loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_line(line: str) -> None:
    """What the launchers say while a run goes on: a line on stderr."""
    print(line, file=sys.stderr, flush=True)


def _gpus() -> int:
    """CUDA GPUs torch sees on this machine (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class RealBackend(Backend):
    """Real processes, real TCP, a real TCPStore and Gloo: the protocols as the sim runs
    them, on this machine (each host at its own loopback address) or on a cluster's
    nodes (``--launcher netns|slurm|k8s|env``)."""

    name: ClassVar[str] = "real"
    summary: ClassVar[str] = MODES["real"].summary
    realism: ClassVar[int] = 1
    launchers: ClassVar[tuple[str, ...]] = ("local", "netns", "slurm", "k8s", "env")

    def fault_table(self) -> FaultTable:
        """:data:`elastic_sim.real.faults.injector.REAL_HANDLERS`."""
        from elastic_sim.real.faults.injector import REAL_HANDLERS

        return REAL_HANDLERS

    def why_not(self, fault: Fault) -> str:
        """Its table's refusal, or what this machine lacks for the fault (tc, nftables),
        or a trigger it cannot follow live."""
        from elastic_sim.real.faults.injector import why_unsupported

        return why_unsupported(fault)

    def rules(self, spec: RunSpec) -> Refused | None:
        """torch must be importable by its processes; hosts placed on cluster nodes start
        without delay."""
        here = spec.launch is None or spec.launch.launcher != "k8s"  # k8s: manifests only
        if here and importlib.util.find_spec("torch") is None:
            return Refused(f"--mode {self.name}", "",
                           f"{self.name} mode runs torch in its processes, and torch is not "
                           f"installed: {TORCH_INSTALL}")
        if spec.launch is not None and spec.launch.launcher != "local":
            for i, h in enumerate(spec.scenario.cluster.host_specs()):
                if h.start_delay > 0:
                    return Refused(spec.file, f"cluster.hosts[{i}].start_delay",
                                   "start_delay is not forwarded to cluster nodes yet; run "
                                   "with the local launcher or --mode sim")
        return None

    def lacks(self, spec: RunSpec) -> Refused | None:
        """A GPU, for ``cluster.device: cuda`` with hosts on this machine (started
        without one, its workers' NCCL groups fail and restart until the time limit)."""
        on_this_machine = spec.launch is None or spec.launch.launcher in ("local", "netns")
        if on_this_machine and spec.scenario.cluster.device == "cuda" and not _gpus():
            return Refused(spec.file, "cluster.device",
                           "cuda runs NCCL groups on this machine's GPUs, and torch sees no "
                           "CUDA GPU here; use device cpu (Gloo), --mode sim, or a launcher "
                           "that places the hosts on GPU nodes")
        return None

    def world(self, sc: Scenario, seed: int) -> World:
        """The scenario's world, its store on a port free here now."""
        from elastic_sim.scenario import build_world

        return build_world(sc, seed, store_port=free_port())

    def run(self, spec: RunSpec, emit: Callable[[TraceEvent], None], guard: RunGuard,
            workdir: Path, progress: Progress | None = None) -> RunResult:
        """Start every host's processes, inject the faults on time, merge their traces."""
        from elastic_sim import real

        watch = None
        if progress:
            progress("starting real processes (importing torch takes a few seconds)")
            from elastic_sim.live import LiveStatus

            watch = LiveStatus(len(spec.world.hosts), progress)
        # Its refusal was asked when the spec was compiled: start, without asking again.
        return real.start(spec.world, list(spec.faults), spec.seed, workdir / "real", emit,
                          launch=spec.launch, log=log_line, guard=guard, watch=watch)
