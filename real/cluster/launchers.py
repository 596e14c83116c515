"""How the nodes of a cluster run get started: ``env`` (by whoever follows the contract),
``netns`` (here, each in a network namespace of its own), ``slurm`` (``srun`` inside an
allocation). The coordinator is the same for all of them; ``k8s`` writes manifests instead
of running (:mod:`.k8s`).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic_sim.faults.model import Fault
from elastic_sim.real.cluster import wire
from elastic_sim.real.cluster.bridge import Bridge, node_address
from elastic_sim.real.cluster.coordinator import Coordinator
from elastic_sim.real.supervisor import warden
from elastic_sim.real.supervisor.supervise import interrupts_raise
from elastic_sim.trace import TraceEvent
from elastic_sim.world import RunResult, World

LAUNCHERS = ("local", "netns", "slurm", "k8s", "env")
NODE_MODULE = "elastic_sim.real.cluster.node"
NODE_EXIT_GRACE = 15.0
"""Seconds nodes get to exit on their own after the coordinator is done."""


@dataclass(frozen=True)
class LaunchOptions:
    """How a real run is spread over machines (``--launcher`` and its options)."""

    launcher: str = "local"
    bind: str = "127.0.0.1"
    """Interface the coordinator listens on (loopback unless the user names another)."""
    port: int = 0
    """Its port (0: any free one; ``env`` users usually fix one)."""
    nodes: int | None = None
    """Number of nodes (default: one per scenario host, or the Slurm allocation's tasks)."""
    scenario_file: str = ""
    """The scenario, as the user named it (for printed commands and scripts)."""
    out: str = ""
    mode: str = "real"
    """What each node runs: the project's processes (real) or torchrun agents (torchrun)."""
    command: str = ""
    """The elastic-sim command a batch script runs (default: ``run`` with these options)."""


MakeCoordinator = Callable[
    [World, Sequence[Fault], int, Path, socket.socket, str, int, Callable[[str], None]],
    Coordinator]
"""Builds the run's coordinator (real mode's :class:`Coordinator`, or torchrun mode's)."""


class NotInAllocation(RuntimeError):
    """``--launcher slurm`` outside a Slurm allocation; the message holds the script."""


def _node_env(secret: str) -> dict[str, str]:
    env = dict(os.environ)
    env[wire.SECRET_ENV] = secret
    env.pop(wire.SECRET_FILE_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    sock.listen(256)
    return sock


def _reachable(bind: str) -> str:
    """An address nodes can dial for a coordinator bound to ``bind``."""
    return socket.gethostname() if bind in ("0.0.0.0", "::", "") else bind


def _stop(procs: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    """Let ``procs`` end within ``grace``; then kill their process groups."""
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def run_cluster(
    world: World, faults: Sequence[Fault], seed: int, workdir: Path,
    emit: Callable[[TraceEvent], None], opts: LaunchOptions, log: Callable[[str], None],
    make: MakeCoordinator = Coordinator,
) -> RunResult:
    """Run ``world`` with one node per machine as ``opts.launcher`` starts them; ``make``
    builds the coordinator (torchrun mode passes its own)."""
    workdir.mkdir(parents=True, exist_ok=True)
    runs = {"netns": _run_netns, "slurm": _run_slurm, "env": _run_env}
    if opts.launcher not in runs:
        raise ValueError(f"launcher {opts.launcher!r} does not run nodes")
    with interrupts_raise():  # SIGTERM cleans up as Ctrl-C does
        return runs[opts.launcher](world, faults, seed, workdir, emit, opts, log, make)


def _run_env(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
             emit: Callable[[TraceEvent], None], opts: LaunchOptions,
             log: Callable[[str], None], make: MakeCoordinator) -> RunResult:
    try:
        secret = wire.secret_from_env()
        where = f"${wire.SECRET_ENV}/${wire.SECRET_FILE_ENV} (as given to this command)"
    except (ValueError, OSError):
        secret = wire.new_secret()
        path = workdir / "secret"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, secret.encode())
        os.close(fd)
        where = f"the file {path} (copy it to each machine)"
    nodes = opts.nodes or len(world.hosts)
    listener = _listen(opts.bind, opts.port)
    port = listener.getsockname()[1]
    log(f"coordinator: waiting for {nodes} nodes at {_reachable(opts.bind)}:{port}; on each "
        f"machine run, with the secret from {where} in {wire.SECRET_FILE_ENV} or "
        f"{wire.SECRET_ENV}:\n  elastic-sim node --coordinator {_reachable(opts.bind)}:{port} "
        f"--index I --count {nodes}   (I = 0..{nodes - 1}, or RANK/WORLD_SIZE set)")
    return make(world, faults, seed, workdir, listener, secret, nodes, log).run(emit)


def _run_netns(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
               emit: Callable[[TraceEvent], None], opts: LaunchOptions,
               log: Callable[[str], None], make: MakeCoordinator) -> RunResult:
    nodes = opts.nodes or len(world.hosts)
    bridge = Bridge(nodes, "c")
    secret = wire.new_secret()
    procs: list[subprocess.Popen[bytes]] = []
    # The warden that backs up the local launcher backs up this one too: if this process
    # is SIGKILLed, it kills the nodes (their command lines carry the run directory) and
    # deletes the namespaces, which nothing else would until a later run swept them.
    ward = warden.start(str(workdir.resolve()), [bridge.hub, *bridge.nodes])
    try:
        bridge.create()
        listener = bridge.listen(opts.port)
        port = listener.getsockname()[1]
        env = _node_env(secret)
        for i in range(nodes):
            ndir = workdir / f"node{i}"
            ndir.mkdir(parents=True, exist_ok=True)
            argv = [*bridge.prefix(i), sys.executable, "-m", NODE_MODULE,
                    "--coordinator", f"{bridge.address}:{port}", "--index", str(i),
                    "--count", str(nodes), "--address", node_address(i),
                    "--workdir", str(ndir), "--parent-pid", str(os.getpid())]
            with open(ndir / "node.log", "wb") as out:
                procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
        coord = make(world, faults, seed, workdir, listener, secret, nodes, log)
        return coord.run(emit)
    finally:
        _stop(procs, NODE_EXIT_GRACE)
        bridge.delete()
        warden.dismiss(ward)


def sbatch_script(world: World, opts: LaunchOptions) -> str:
    """The batch script that runs this scenario through Slurm, one task per host."""
    n = opts.nodes or len(world.hosts)
    minutes = int(world.time_limit // 60) + 15
    return (
        "#!/bin/bash\n"
        f"#SBATCH --job-name=elastic-sim\n#SBATCH --ntasks={n}\n#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --time={minutes}\n"
        "# The coordinator runs in the batch step and starts one node per task with srun.\n"
        f"{opts.command or _run_command(opts)}\n"
    )


def _run_command(opts: LaunchOptions) -> str:
    out = f" --out {shlex.quote(opts.out)}" if opts.out else ""
    return (f"elastic-sim run {shlex.quote(opts.scenario_file)} --mode {opts.mode} "
            f"--launcher slurm --bind 0.0.0.0{out}")


def check_allocation(world: World, opts: LaunchOptions) -> None:
    """Raise :class:`NotInAllocation`, with the script to submit, outside an allocation."""
    if "SLURM_JOB_ID" not in os.environ:
        raise NotInAllocation(
            "--launcher slurm runs inside a Slurm allocation (no SLURM_JOB_ID here); "
            "submit the script above with sbatch, or run the same command under salloc"
            "\n\n" + sbatch_script(world, opts))


def _run_slurm(world: World, faults: Sequence[Fault], seed: int, workdir: Path,
               emit: Callable[[TraceEvent], None], opts: LaunchOptions,
               log: Callable[[str], None], make: MakeCoordinator) -> RunResult:
    check_allocation(world, opts)
    allocated = os.environ.get("SLURM_NTASKS") or os.environ.get("SLURM_NNODES")
    nodes = opts.nodes or (int(allocated) if allocated else len(world.hosts))
    secret = wire.new_secret()
    listener = _listen(opts.bind, opts.port)
    port = listener.getsockname()[1]
    argv = ["srun", f"--ntasks={nodes}", "--kill-on-bad-exit=0", sys.executable, "-m",
            NODE_MODULE, "--coordinator", f"{_reachable(opts.bind)}:{port}"]
    log(f"coordinator: starting {nodes} nodes: {' '.join(argv)}")
    with open(workdir / "srun.log", "wb") as out:
        srun = subprocess.Popen(argv, env=_node_env(secret), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return make(world, faults, seed, workdir, listener, secret, nodes, log).run(emit)
    finally:
        _stop([srun], NODE_EXIT_GRACE)
