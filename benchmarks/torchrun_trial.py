"""Real ``torchrun`` through one fault: start the agents (c10d rendezvous on loopback, agent 0
hosting the store), wait for training, SIGKILL a worker or a whole agent, and read the
worlds that trained from the workers' logs. The scenario comes from elastic-sim's YAML of the
same fault (:func:`setup_from_yaml`). Used by ``torchrun_compare.py``.

Every process started here carries a marker in its environment; whatever happens, all of
them are killed before :func:`cluster` returns (agents' process groups first, then any
marked process left, workers included: torchrun starts workers in their own sessions).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
WORKER = ROOT / "benchmarks" / "torchrun_worker.py"
MARKER = "TORCHRUN_COMPARE_MARKER"

RDZV_CONF_KEYS = ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
                  "keep_alive_interval", "keep_alive_max_attempt")
"""Scenario knobs that torchrun takes through ``--rdzv-conf`` (integer seconds upstream)."""


@dataclass(frozen=True)
class Setup:
    """One scenario as torchrun runs it, read from elastic-sim's YAML of the same fault."""

    name: str
    yaml: str
    fault: str
    """"worker_crash" (SIGKILL one worker) or "scale_down" (SIGKILL one agent and its
    workers)."""
    agents: int
    nproc: int
    min_nodes: int
    max_nodes: int
    target_agent: int
    """Index of the agent hit (host hN is agent N; agent 0 hosts the rendezvous store)."""
    target_local_rank: int
    rdzv_conf: tuple[tuple[str, int], ...]
    max_restarts: int
    monitor_interval: float
    step_s: float
    pg_timeout: float
    warm_steps: int = 5
    after_steps: int = 5

    def rdzv_conf_arg(self, agent: int) -> str:
        """``--rdzv-conf`` for one agent: is_host pins the store to agent 0."""
        return ",".join([f"is_host={1 if agent == 0 else 0}",
                         *(f"{k}={v}" for k, v in self.rdzv_conf)])


def setup_from_yaml(name: str, yaml_path: str) -> Setup:
    """Hosts, knobs, step time and the fault of an elastic-sim torchelastic scenario."""
    import yaml

    doc = yaml.safe_load((ROOT / yaml_path).read_text())
    knobs = doc["protocol"]["knobs"]
    hosts = int(doc["cluster"]["hosts"])
    if doc["cluster"].get("store_host", "h0") != "h0":
        raise ValueError(f"{yaml_path}: the store must be on h0 (agent 0 is the host)")
    fault = doc["faults"][0]
    if fault["type"] == "crash_process":
        host, proc = str(fault["proc"]).split("/")
        kind, local_rank = "worker_crash", int(proc.lstrip("w"))
    elif fault["type"] == "crash":
        host, kind, local_rank = str(fault["host"]), "scale_down", 0
    else:
        raise ValueError(f"{yaml_path}: fault type {fault['type']!r} is not compared")
    return Setup(
        name=name, yaml=yaml_path, fault=kind, agents=hosts,
        nproc=int(knobs.get("nproc_per_node", 1)),
        min_nodes=int(knobs.get("min_nodes", hosts)), max_nodes=int(knobs.get("max_nodes", hosts)),
        target_agent=int(host.lstrip("h")), target_local_rank=local_rank,
        rdzv_conf=tuple((k, int(knobs[k])) for k in RDZV_CONF_KEYS if k in knobs),
        max_restarts=int(knobs.get("max_restarts", 0)),
        monitor_interval=float(knobs.get("monitor_interval", 0.1)),
        step_s=float(doc["workload"]["step_time"]),
        pg_timeout=float(knobs.get("pg_timeout", 1800)),
    )


@dataclass
class World:
    """The workers started for one rendezvous round (a world), whether or not it trained."""

    id: int
    """The rendezvous round."""
    spawned: float
    """When its first worker process started (before ``import torch``)."""
    first_step: float | None
    nodes: int
    workers: int
    ranks: list[list[int]]
    """[group_rank, local_rank, rank] of every member, sorted."""
    restarts: list[int]
    """TORCHELASTIC_RESTART_COUNT of every member (counted per agent upstream)."""
    steps: int


@dataclass
class Trial:
    """What one torchrun trial observed."""

    fault_at: float | None = None
    recovery_s: float | None = None
    workers_started_s: float | None = None
    """Fault to the first new worker process (detect, stop, re-rendezvous, spawn); the
    rest of the recovery is the new workers' start-up (interpreter, import torch, init)."""
    worlds: list[World] = field(default_factory=list)
    error: str | None = None

    @property
    def membership(self) -> list[int]:
        """Node count of every world, in order."""
        return [w.nodes for w in self.worlds]


# ------------------------------------------------------------------------------------------
# Processes: start marked, find by marker, always clean up.
# ------------------------------------------------------------------------------------------


def marked_pids(marker: str) -> list[int]:
    """Our processes whose environment carries this marker (others are unreadable)."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


@contextlib.contextmanager
def cluster(setup: Setup, log_dir: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start the agents; on exit (normal or not) stop and reap every marked process."""
    marker = uuid.uuid4().hex
    port = _free_port()
    env = dict(os.environ, **{MARKER: marker}, PYTHONUNBUFFERED="1",
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    agents: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(setup.agents):
            cmd = [
                str(VENV_BIN / "torchrun"),
                f"--nnodes={setup.min_nodes}:{setup.max_nodes}",
                f"--nproc-per-node={setup.nproc}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=compare", f"--rdzv-conf={setup.rdzv_conf_arg(i)}",
                f"--max-restarts={setup.max_restarts}",
                f"--monitor-interval={setup.monitor_interval}",
                "--local-addr=127.0.0.1",
                str(WORKER), str(log_dir), str(setup.step_s), str(setup.pg_timeout),
                f"127.0.0.1:{port}", "compare",
            ]
            out = (log_dir / f"agent{i}.log").open("wb")
            agents.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True, cwd=ROOT))
            out.close()
            if i == 0:
                time.sleep(0.5)  # agent 0 hosts the store: let it listen first
        yield agents
    finally:
        for a in agents:  # SIGTERM: torchrun stops its workers itself
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(a.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(a.poll() is None for a in agents):
            time.sleep(0.1)
        for _ in range(3):
            left = marked_pids(marker)
            if not left:
                break
            for pid in left:
                _kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for a in agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                a.wait(timeout=5)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------
# Logs -> worlds.
# ------------------------------------------------------------------------------------------


def read_lines(log_dir: Path) -> list[dict[str, Any]]:
    """Every JSON line the workers wrote (a torn last line is skipped)."""
    out = []
    for path in sorted(log_dir.glob("worker-*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


def worlds_of(lines: list[dict[str, Any]]) -> list[World]:
    """The worlds whose workers started, in the order they started."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for ln in lines:
        if ln["kind"] in ("spawn", "step"):
            by_round.setdefault(int(ln["round"]), []).append(ln)
    worlds = []
    for rnd, lns in by_round.items():
        members = {ln["pid"]: ln for ln in lns}
        steps = [ln for ln in lns if ln["kind"] == "step"]
        worlds.append(World(
            id=rnd,
            spawned=min(ln["t"] for ln in lns),
            first_step=min((ln["t"] for ln in steps), default=None),
            nodes=max(ln["group_world_size"] for ln in lns),
            workers=max(ln["world_size"] for ln in lns),
            ranks=sorted([m["group_rank"], m["local_rank"], m["rank"]] for m in members.values()),
            restarts=sorted(m["restart"] for m in members.values()),
            steps=max((ln["step"] for ln in steps), default=0),
        ))
    return sorted(worlds, key=lambda w: w.spawned)


def _wait_for(log_dir: Path, done: Any, timeout: float,
              agents: list[subprocess.Popen[bytes]]) -> list[World]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worlds = worlds_of(read_lines(log_dir))
        if done(worlds):
            return worlds
        if all(a.poll() is not None for a in agents):
            break
        time.sleep(0.05)
    raise TimeoutError("the expected world did not train in time")


# ------------------------------------------------------------------------------------------
# One torchrun trial.
# ------------------------------------------------------------------------------------------


def torchrun_trial(setup: Setup, log_dir: Path, startup_timeout: float = 120.0,
                   recovery_timeout: float = 90.0) -> Trial:
    """Start the agents, wait for training, inject the fault, wait for the new world."""
    trial = Trial()
    full = setup.agents * setup.nproc
    after = full if setup.fault == "worker_crash" else (setup.agents - 1) * setup.nproc
    try:
        with cluster(setup, log_dir) as agents:
            worlds = _wait_for(log_dir, lambda ws: any(
                w.workers == full and w.steps >= setup.warm_steps for w in ws),
                startup_timeout, agents)
            before = {w.id for w in worlds}
            lines = read_lines(log_dir)
            target_agent = agents[setup.target_agent].pid
            world = max(worlds, key=lambda w: w.spawned).id
            mine = {ln["local_rank"]: ln["pid"] for ln in lines
                    if ln["agent_pid"] == target_agent and ln["round"] == world}
            if setup.target_local_rank not in mine:
                raise RuntimeError("the target worker has not logged")
            victims = sorted(mine.values())
            trial.fault_at = time.time()
            if setup.fault == "worker_crash":
                _kill(mine[setup.target_local_rank], signal.SIGKILL)
            else:  # the whole host: its agent and its workers
                _kill(target_agent, signal.SIGKILL)
                for pid in victims:
                    _kill(pid, signal.SIGKILL)
            fault_at = trial.fault_at

            def recovered(ws: list[World]) -> bool:
                return any(w.id not in before and w.workers == after
                           and w.steps >= setup.after_steps for w in ws)

            worlds = _wait_for(log_dir, recovered, recovery_timeout, agents)
            trial.worlds = worlds
            new = [w for w in worlds if w.id not in before]
            trial.recovery_s = min(w.first_step for w in new if w.first_step) - fault_at
            trial.workers_started_s = min(w.spawned for w in new) - fault_at
    except (TimeoutError, RuntimeError) as exc:
        trial.error = str(exc)
        trial.worlds = worlds_of(read_lines(log_dir))
    return trial
