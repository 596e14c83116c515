"""The real runtime: a world's processes as OS processes on this machine, talking over
TCP, a real ``torch.distributed.TCPStore`` and Gloo, with faults injected by signals.

Its rooms: :mod:`.runtime`, what the protocols see inside a process; :mod:`.supervisor`,
what starts, watches and reaps the processes; :mod:`.faults`, the fault mechanics
(signals, nftables, tc, conntrack); :mod:`.cluster`, one node per machine under a
coordinator; :mod:`.torchrun`, torchelastic scenarios run by upstream's own agents. The
modules at the top, :mod:`.proc` and :mod:`.warden`, are only the ``python -m`` addresses
of the processes a run starts.

Importing this package does not import torch; only the processes it starts do.
"""

from __future__ import annotations

if __name__ != "elastic_sim.real":  # `import real` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.real; import it by that name "
                      "(a second copy of its modules would not be the same)")

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

from elastic_sim.faults.model import Fault
from elastic_sim.real.cluster.launchers import LaunchOptions
from elastic_sim.real.faults.injector import UnsupportedInRealMode, check_supported
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

__all__ = ["LaunchOptions", "UnsupportedInRealMode", "run", "start"]


def run(
    world: World,
    faults: Sequence[Fault],
    seed: int,
    workdir: Path,
    emit: Callable[[TraceEvent], None],
    bind: str = "127.0.0.1",
    launch: LaunchOptions | None = None,
    log: Callable[[str], None] = print,
    guard: Callable[[], tuple[str, str] | None] | None = None,
    watch: Callable[[TraceEvent], None] | None = None,
) -> RunResult:
    """Run ``world`` with ``faults`` for real; emit every trace event in run-time order.

    Raises :class:`UnsupportedInRealMode` before starting anything if a fault cannot be
    injected for real, and ModuleNotFoundError if torch is not installed. Processes, logs
    and per-process traces live under ``workdir``; none of the processes outlives the
    call, whatever happens (Ctrl-C included). ``launch`` spreads the hosts over cluster
    nodes (:mod:`elastic_sim.real.cluster`); by default every host runs on this machine. ``guard``
    is asked every supervision tick of a local run; (kind, message) ends the run at once
    (``RunResult.stopped``). ``watch`` sees events while a local run goes on (live
    progress; in the order they are read, not run-time order)."""
    check_supported(world, faults)
    if importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("real mode needs torch (pip install torch==2.13.0)", name="torch")
    if launch is not None and launch.launcher != "local":
        late = [h.name for h in world.hosts if h.start_delay > 0]
        if late:
            raise UnsupportedInRealMode(
                f"host {late[0]!r}: start_delay is not forwarded to cluster nodes yet; run "
                "with the local launcher or --mode sim")
    return start(world, faults, seed, workdir, emit, bind, launch, log, guard, watch)


def start(
    world: World,
    faults: Sequence[Fault],
    seed: int,
    workdir: Path,
    emit: Callable[[TraceEvent], None],
    bind: str = "127.0.0.1",
    launch: LaunchOptions | None = None,
    log: Callable[[str], None] = print,
    guard: Callable[[], tuple[str, str] | None] | None = None,
    watch: Callable[[TraceEvent], None] | None = None,
) -> RunResult:
    """:func:`run` without asking again whether real mode can run ``world`` and
    ``faults``: for a caller that asked already (the real backend, when its spec was
    compiled: :meth:`elastic_sim.backends.RealBackend.refusal`)."""
    if launch is not None and launch.launcher != "local":
        from elastic_sim.real.cluster.launchers import run_cluster

        return run_cluster(world, faults, seed, Path(workdir), emit, launch, log)
    from elastic_sim.real.supervisor.launcher import Launcher

    return Launcher(world, faults, seed, Path(workdir), bind, guard=guard, watch=watch).run(emit)
