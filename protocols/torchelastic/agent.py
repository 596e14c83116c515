"""The elastic agent (upstream ``SimpleElasticAgent`` + ``LocalElasticAgent``): one per
node. It rendezvouses, assigns worker ranks, starts its workers as child processes, polls
them every ``monitor_interval``, restarts the group on a local failure (counted against
``max_restarts``) or when nodes wait to join (not counted), and on success waits for the
other agents at the exit barrier.

Deviations from upstream, all in how a node is modelled, not in what it decides: the
workers' checkpoint "disk" is this agent's memory (workers send it their checkpoints; a
host that crashes loses it, as it loses its local disk), and each world's process group is
named after its rendezvous round (upstream reuses the agent store with no per-attempt
prefix, see ``shared/calibration.md``).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.protocols.api import (
    JSON,
    Cancelled,
    OperationTimeout,
    Proc,
    Runtime,
    Store,
    Task,
    yield_point,
)
from elastic_sim.protocols.torchelastic.agent_ranks import AgentRanks, assign_ranks
from elastic_sim.protocols.torchelastic.handler import DynamicRendezvousHandler, RendezvousInfo
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs
from elastic_sim.protocols.torchelastic.ops import RendezvousGracefulExitError

WORKER_ENTRY = "elastic_sim.protocols.torchelastic.worker:worker_main"
TERMINAL_STATE_KEY = "torchelastic/agent/terminal_state"
ROLE = "default"
DEATH_SIGNALS = ("TERM", "INT", "HUP", "QUIT")
"""Upstream's default TORCHELASTIC_SIGNALS_TO_HANDLE: each raises SignalException in the
agent once its workers have started (before that, each has its default action, except
launch_agent's KeyboardInterrupt for INT)."""


class WorkerState(enum.Enum):
    """Upstream's ``WorkerState``: the worker group changes state as a unit."""

    UNKNOWN = "UNKNOWN"
    INIT = "INIT"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    WorkerState.INIT: frozenset({WorkerState.HEALTHY}),
    WorkerState.HEALTHY: frozenset({WorkerState.HEALTHY, WorkerState.SUCCEEDED,
                                    WorkerState.FAILED, WorkerState.UNHEALTHY,
                                    WorkerState.STOPPED, WorkerState.UNKNOWN}),
    WorkerState.UNHEALTHY: frozenset({WorkerState.STOPPED, WorkerState.FAILED}),
    WorkerState.FAILED: frozenset({WorkerState.STOPPED, WorkerState.FAILED}),
    WorkerState.STOPPED: frozenset({WorkerState.HEALTHY}),
    WorkerState.SUCCEEDED: frozenset(),
    WorkerState.UNKNOWN: frozenset(),
}
"""Which group state may follow which in the control loop, as upstream's
``SimpleElasticAgent`` sets them: INIT -> HEALTHY once the first workers started; HEALTHY ->
whatever a monitor pass reads (UNKNOWN: it lost track of its workers), or STOPPED for a
membership restart; UNHEALTHY or FAILED -> STOPPED for a counted restart, or FAILED with
no restart left; STOPPED -> HEALTHY once the restart's rendezvous and worker start
succeeded. SUCCEEDED and UNKNOWN are final. Every change goes through :func:`transition`."""


class IllegalTransition(RuntimeError):
    """A change of the worker group's state that :data:`TRANSITIONS` does not allow."""


def transition(current: WorkerState, new: WorkerState) -> WorkerState:
    """``new``, if the group may go from ``current`` to it (:data:`TRANSITIONS`); else
    :class:`IllegalTransition`."""
    if new not in TRANSITIONS[current]:
        raise IllegalTransition(f"[{ROLE}] worker group cannot go from {current.value} to "
                                f"{new.value}")
    return new


class SignalException(Exception):
    """A handled death signal (TERM or INT) once workers exist, as upstream raises it."""

    def __init__(self, sigval: str) -> None:
        super().__init__(f"Process received signal SIG{sigval}")
        self.sigval = sigval


class KeyboardInterruptBeforeWorkers(Exception):
    """SIGINT before any worker started: Python's KeyboardInterrupt (upstream's handlers
    are not installed yet), which is not an ``Exception`` there, so the launcher's
    ``finally`` still closes the rendezvous."""


@dataclass
class RunResult:
    """What the agent returns: the group's final state and the failed workers' exit codes
    by global rank."""

    state: WorkerState
    failures: dict[int, int] = field(default_factory=dict)

    def is_failed(self) -> bool:
        """Whether the worker group ended FAILED."""
        return self.state is WorkerState.FAILED


def decide(state: WorkerState, remaining_restarts: int, nodes_waiting: int) -> str:
    """The control loop's decision after one monitor pass: ``"exit_barrier"``,
    ``"restart"`` (counted), ``"fail"``, ``"membership_restart"`` (not counted), ``"wait"``
    or ``"raise"`` (an unexpected state). ``nodes_waiting`` is only consulted when
    HEALTHY."""
    if state is WorkerState.SUCCEEDED:
        return "exit_barrier"
    if state in (WorkerState.UNHEALTHY, WorkerState.FAILED):
        return "restart" if remaining_restarts > 0 else "fail"
    if state is WorkerState.HEALTHY:
        return "membership_restart" if nodes_waiting > 0 else "wait"
    return "raise"


def monitor_state(codes: list[int | None]) -> WorkerState:
    """The group's state from its workers' exit codes (None: still running): any failure
    -> FAILED, all exited 0 -> SUCCEEDED, else HEALTHY."""
    if any(c is not None and c != 0 for c in codes):
        return WorkerState.FAILED
    if codes and all(c == 0 for c in codes):
        return WorkerState.SUCCEEDED
    return WorkerState.HEALTHY


def worker_env(knobs: TorchElasticKnobs, info: RendezvousInfo, ranks: AgentRanks,
               local_rank: int, restart_count: int) -> dict[str, str]:
    """The environment upstream gives worker ``local_rank`` (``LocalElasticAgent``)."""
    n = knobs.nproc_per_node
    env = {
        "LOCAL_RANK": str(local_rank),
        "RANK": str(ranks.base_global_rank + local_rank),
        "GROUP_RANK": str(info.rank),
        "ROLE_RANK": str(ranks.base_role_rank + local_rank),
        "ROLE_NAME": ROLE,
        "LOCAL_WORLD_SIZE": str(n),
        "WORLD_SIZE": str(ranks.global_world_size),
        "GROUP_WORLD_SIZE": str(info.world_size),
        "ROLE_WORLD_SIZE": str(ranks.role_world_size),
        "MASTER_ADDR": info.bootstrap.master_addr,
        "MASTER_PORT": str(info.bootstrap.master_port),
        "TORCHELASTIC_RESTART_COUNT": str(restart_count),
        "TORCHELASTIC_MAX_RESTARTS": str(knobs.max_restarts),
        "TORCHELASTIC_RUN_ID": knobs.run_id,
        "TORCHELASTIC_USE_AGENT_STORE": str(knobs.share_store),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if n > 1:
        env["OMP_NUM_THREADS"] = "1"  # torchrun sets it when nproc > 1 and it is unset
    return env


class ElasticAgent:
    """One node's agent: its worker group, restart budget, and the host's checkpoint."""

    def __init__(self, rt: Runtime, handler: DynamicRendezvousHandler, knobs: TorchElasticKnobs,
                 workload: Mapping[str, JSON], seed: int) -> None:
        self.rt = rt
        self.handler = handler
        self.knobs = knobs
        self.workload = dict(workload)
        self.seed = seed
        self.remaining_restarts = knobs.max_restarts
        self.state = WorkerState.INIT
        self.procs: list[Proc] = []
        self.info: RendezvousInfo | None = None
        self.checkpoint: dict[str, Any] | None = None
        """The last checkpoint a worker of this host saved (the host's disk)."""
        self.workers_started = False
        self.shutdown_called = False
        self._signal: str | None = None
        self._main: Task[RunResult] | None = None

    # -- the control loop ------------------------------------------------------------

    async def run(self) -> RunResult | None:
        """Upstream ``run()``: None after a graceful rendezvous exit (a spare of a closed
        rendezvous); SignalException after stopping the workers; other errors propagate,
        with the workers stopped."""
        disk = self.rt.spawn(self._disk_loop(), "agent.disk")
        try:
            return await self._invoke_run_interruptible()
        except SignalException:
            await self._shutdown()
            raise
        finally:
            if not self.shutdown_called:
                await self._shutdown()
            disk.cancel()

    async def _invoke_run_interruptible(self) -> RunResult | None:
        self._main = self.rt.spawn(self._invoke_run(), "agent.invoke_run")
        try:
            return await self._main
        except Cancelled:
            if self._signal is None:
                raise
            if self._signal == "KeyboardInterrupt":
                raise KeyboardInterruptBeforeWorkers() from None
            raise SignalException(self._signal) from None
        except RendezvousGracefulExitError as exc:
            self.rt.record("rdzv_graceful_exit", error=type(exc).__name__)
            return None

    async def _invoke_run(self) -> RunResult:
        await self._initialize_workers()
        while True:
            await self.rt.poll(self.knobs.monitor_interval, self._idle, self.handler.cached_until)
            result = await self._monitor_workers()
            self._set_state(result.state)
            waiting = 0
            if result.state is WorkerState.HEALTHY:
                waiting = await self.handler.num_nodes_waiting()
                # num_nodes_waiting() released the heartbeat lock: the keep-alive thread
                # may run before the agent acts on what it read
                await yield_point(self.rt, "torch/distributed/elastic/agent/server/api.py "
                                  "_invoke_run: num_nodes_waiting() -> _restart_workers()")
            action = decide(result.state, self.remaining_restarts, waiting)
            if action == "exit_barrier":
                await self._exit_barrier()
                return result
            if action == "restart":
                self.remaining_restarts -= 1
                self.rt.record("agent_restart", reason=result.state.value,
                               remaining_restarts=self.remaining_restarts)
                await self._restart_workers()
            elif action == "fail":
                await self._stop_workers()
                self._set_state(WorkerState.FAILED)
                return result
            elif action == "membership_restart":
                self.rt.record("agent_restart", reason="nodes_waiting", nodes_waiting=waiting,
                               remaining_restarts=self.remaining_restarts)
                await self._restart_workers()
            elif action == "raise":
                raise RuntimeError(f"[{ROLE}] Worker group in {result.state.value} state")

    def on_signal(self, sig: str) -> None:
        """A death signal (:data:`DEATH_SIGNALS`) once workers exist: interrupt the control
        loop (upstream raises SignalException in the main thread)."""
        if self._signal is None:
            self._signal = sig
            self.rt.record("agent_signal", signal=sig)
            if self._main is not None:
                self._main.cancel()

    def keyboard_interrupt(self) -> None:
        """SIGINT before workers exist (the launcher's handler until workers start)."""
        if self._signal is None and not self.workers_started:
            self._signal = "KeyboardInterrupt"
            self.rt.record("agent_signal", signal="INT", before_workers=True)
            if self._main is not None:
                self._main.cancel()

    # -- worker group life cycle -----------------------------------------------------

    async def _initialize_workers(self) -> None:
        info = await self._rendezvous()
        ranks = await assign_ranks(info.store, info.rank, info.world_size,
                                   self.knobs.nproc_per_node, self.knobs.identical_workers)
        await self._start_workers(info, ranks)
        self._set_state(WorkerState.HEALTHY)

    async def _rendezvous(self) -> RendezvousInfo:
        self.rt.record("rdzv_join", round=self.info.round + 1 if self.info else 0)
        info = await self.handler.next_rendezvous()
        self.info = info
        self.rt.record("rdzv_done", round=info.round, members=[n.addr for n in info.members],
                       rank=info.rank, world_size=info.world_size,
                       master=f"{info.bootstrap.master_addr}:{info.bootstrap.master_port}")
        return info

    async def _start_workers(self, info: RendezvousInfo, ranks: AgentRanks) -> None:
        restart_count = self.knobs.max_restarts - self.remaining_restarts
        args: dict[str, JSON] = {
            "workload": self.workload,
            "seed": self.seed,
            "round": info.round,
            "members": [n.addr for n in info.members],
            "agent": self.rt.name,
            "checkpoint": self.checkpoint,
            "pg_timeout": self.knobs.pg_timeout,
        }
        self.procs = []
        for local_rank in range(self.knobs.nproc_per_node):
            env = worker_env(self.knobs, info, ranks, local_rank, restart_count)
            self.procs.append(
                await self.rt.start_process(f"w{local_rank}", WORKER_ENTRY, args, env))
        self.rt.record("workers_started", round=info.round, base_rank=ranks.base_global_rank,
                       world_size=ranks.global_world_size, restart_count=restart_count)
        if not self.workers_started:
            # Upstream installs its death-signal handlers when workers first start, for
            # TORCHELASTIC_SIGNALS_TO_HANDLE (default SIGTERM,SIGINT,SIGHUP,SIGQUIT).
            self.workers_started = True
            for sig in DEATH_SIGNALS:
                self.rt.on_signal(sig, functools.partial(self.on_signal, sig))

    def _idle(self) -> bool:
        """A turn of the monitor loop would do nothing now: the group is and stays HEALTHY
        (no state change to trace), no signal, and the wait list is read from a fresh
        cache and empty (nothing awaited but the zero-time yield after the read; decide()
        says wait)."""
        return (self.state is WorkerState.HEALTHY and self._signal is None
                and monitor_state([p.poll() for p in self.procs]) is WorkerState.HEALTHY
                and self.handler.cached_waiting() == 0)

    async def _monitor_workers(self) -> RunResult:
        codes = [p.poll() for p in self.procs]
        state = monitor_state(codes)
        failures = {}
        if state is WorkerState.FAILED:
            base = int(self._base_rank())
            failures = {base + i: c for i, c in enumerate(codes) if c is not None and c != 0}
            # upstream's poll closes the rest at once, with the fixed grace
            await self.close_workers(self.knobs.stop_timeout)
        return RunResult(state, failures)

    def _base_rank(self) -> int:
        return 0 if self.info is None else self.info.rank * self.knobs.nproc_per_node

    async def _restart_workers(self) -> None:
        await self._stop_workers()
        self._set_state(WorkerState.STOPPED)
        await self._initialize_workers()

    async def _stop_workers(self) -> None:
        await self.close_workers(self.knobs.stop_timeout)

    async def _shutdown(self) -> None:
        self.shutdown_called = True
        await self.close_workers(self.knobs.shutdown_timeout)

    async def close_workers(self, grace: float) -> None:
        """SIGTERM every live worker, SIGKILL those still alive after ``grace`` seconds."""
        live = [p for p in self.procs if p.poll() is None]
        if not live:
            return
        for p in live:
            p.signal("TERM")
        deadline = self.rt.monotonic() + grace
        for p in live:
            left = deadline - self.rt.monotonic()
            try:
                await self.rt.wait_for(p.wait(), max(left, 0.0))
            except OperationTimeout:
                break
        for p in live:
            if p.poll() is None:
                p.signal("KILL")
                await p.wait()

    async def _exit_barrier(self) -> None:
        """Wait (up to exit_barrier_timeout) for every agent of the round to succeed too;
        errors other than signals are logged and swallowed, as upstream."""
        assert self.info is not None
        store: Store = self.info.store
        prefix = TERMINAL_STATE_KEY
        self.rt.record("exit_barrier_enter", round=self.info.round,
                       world_size=self.info.world_size)
        try:
            idx = await store.add(prefix + "/num_members", 1)
            if idx == self.info.world_size:
                await store.set(prefix + "/last_member", b"<val_ignored>")
            await store.wait([prefix + "/last_member"], self.knobs.exit_barrier_timeout)
            self.rt.record("exit_barrier_done", round=self.info.round)
        except Exception as exc:  # upstream logs every non-signal error and goes on
            self.rt.record("exit_barrier_failed", error=f"{type(exc).__name__}: {exc}")

    # -- the host's checkpoint -------------------------------------------------------

    async def _disk_loop(self) -> None:
        """Keep the newest checkpoint the workers save; record it as committed."""
        while True:
            msg = await self.rt.recv()
            body = msg.body
            if body.get("kind") != "checkpoint":
                continue
            step = int(body["step"])
            if self.checkpoint is None or step > int(self.checkpoint["step"]):
                self.checkpoint = {"step": step, "params": list(body["params"]),
                                   "digest": str(body["digest"])}
                self.rt.record("commit", step=step, digest=str(body["digest"]))

    def _set_state(self, state: WorkerState) -> None:
        """The group's state changes (:func:`transition`); a change is traced."""
        if transition(self.state, state) is not self.state:
            self.rt.record("agent_state", state=state.value,
                           remaining_restarts=self.remaining_restarts)
        self.state = state
