"""Knobs of the torchelastic model (torchrun + c10d rendezvous + elastic agent), with
upstream's defaults (torch 2.13).

Two upstream entry points disagree on one default: ``max_restarts`` is 0 for the torchrun
CLI and 3 for the Python ``LaunchConfig``. A scenario runs torchrun, so the default here is
the CLI's 0; a scenario that means ``LaunchConfig`` says ``max_restarts: 3``.

Where the rendezvous store lives is the scenario's ``cluster.store_host``: that host's agent
is the one whose address matches ``--rdzv-endpoint`` (``is_host`` true), every other agent
is a client.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sim.protocols.ranges import Count, Period, Port, PosCount, ProcsPerHost, Seconds
from elastic_sim.protocols.torchelastic.state import RendezvousSettings


@dataclass(frozen=True)
class TorchElasticKnobs:
    """What a torchrun command line and its environment set, in seconds where timed."""

    min_nodes: PosCount = 1
    """``--nnodes MIN:MAX``: the smallest world a round may form with."""
    max_nodes: PosCount = 1
    """``--nnodes MIN:MAX``: a round completes at once when this many have joined."""
    nproc_per_node: ProcsPerHost = 1
    """Workers per agent (``--nproc-per-node``)."""
    run_id: str = "none"
    """``--rdzv-id`` (the CLI's default is the literal string "none")."""
    # The rendezvous timeouts take their upstream defaults from RendezvousSettings.
    join_timeout: Period = RendezvousSettings.join_timeout
    """``--rdzv-conf join_timeout`` (seconds, upstream 600): how long an agent waits for a
    round to complete before its rendezvous fails with RendezvousTimeoutError."""
    last_call_timeout: Period = RendezvousSettings.last_call_timeout
    """``--rdzv-conf last_call_timeout`` (seconds, upstream 30): once ``min_nodes`` have
    joined, how long the round waits for more before it completes with those it has."""
    close_timeout: Period = RendezvousSettings.close_timeout
    """``--rdzv-conf close_timeout`` (seconds, upstream 30): the deadline of closing the
    rendezvous (marking it closed in the store) when the job ends."""
    heartbeat_timeout: Period = RendezvousSettings.heartbeat_timeout
    """``--rdzv-conf heartbeat_timeout`` (seconds, upstream 5): the deadline of one
    keep-alive write (checked only between its store calls), not when a node counts as
    dead (that is ``keep_alive_interval x keep_alive_max_attempt``)."""
    keep_alive_interval: Period = RendezvousSettings.keep_alive_interval
    """``--rdzv-conf keep_alive_interval`` (seconds, upstream 5): how often each agent
    writes its heartbeat into the rendezvous state."""
    keep_alive_max_attempt: Count = RendezvousSettings.keep_alive_max_attempt
    """``--rdzv-conf keep_alive_max_attempt`` (upstream 3): heartbeats a node may miss;
    another agent removes it from the state once its last heartbeat is older than
    ``keep_alive_interval x keep_alive_max_attempt`` by that agent's clock (15 s)."""
    read_timeout: Period = 60.0
    """Rendezvous TCPStore client timeout (connect, get, wait)."""
    store_port: Port = 29400
    """Port of the rendezvous store on the store host (``--rdzv-endpoint``'s port)."""
    monitor_interval: Period = 0.1
    """``--monitor-interval``: the agent polls its workers this often."""
    max_restarts: Count = 0
    """``--max-restarts``: torchrun CLI default 0 (``LaunchConfig``'s default is 3)."""
    shutdown_timeout: Seconds = 30.0
    """SIGTERM -> SIGKILL grace when the agent shuts down (a death signal, or leaving
    ``run()``): ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``."""
    stop_timeout: Seconds = 30.0
    """SIGTERM -> SIGKILL grace when stopping workers for a restart, or the rest of the
    group after one failed: fixed at 30 s upstream (``PContext.close``'s default), not
    affected by ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``."""
    exit_barrier_timeout: Seconds = 300.0
    """How long a succeeded agent waits for the others before exiting anyway."""
    pg_timeout: Period | None = None
    """Workers' process-group timeout: a hung peer is noticed after this. None (the
    default, as a script that passes no ``timeout`` to ``init_process_group``): the
    backend's default, which torch picks by backend (``_get_default_timeout``): Gloo's
    30 min on ``cluster.device: cpu``, NCCL's 10 min on ``cuda``. Settled when the world
    is built (:meth:`Scenario.knobs`), so ``run_start`` records the value the run used."""
    share_store: bool = True
    """Shared agent store (default since 2.5): rank 0's agent hosts the store the workers
    bootstrap from. False = ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: every round's
    rank-0 worker hosts its own store on a fresh port."""
    identical_workers: bool = False
    """``TORCH_ELASTIC_WORKER_IDENTICAL=1``: ranks computed locally, no store traffic."""
    state_codec_cost: Seconds = 10e-6
    """Sim only: CPU seconds one encode or decode of the rendezvous state costs upstream
    (``pickle`` + base64 of ``_RendezvousState``), plus ``state_codec_cost_per_node`` per
    node in it. Measured with ``benchmarks/calibrate_costs.py`` (torch 2.13, 2 vCPU):
    encode + decode of a state of N participants took, median (p90), 0.021 (0.030) ms at
    N = 2, 0.040 (0.052) ms at 8, 0.23 (0.45) ms at 64, 1.8 (6.1) ms at 512 and 24 (31) ms
    at 4,096: about 10 us + 2 to 3 us per node each way, half of each figure charged per
    direction (split assumed, not measured)."""
    state_codec_cost_per_node: Seconds = 2e-6
    """Sim only: the per-node part of ``state_codec_cost`` (seconds per node, each way)."""

    def problem(self) -> tuple[str, str] | None:
        """The first cross-field rule upstream enforces that these knobs break, as (knob,
        message), or None (each knob's own range is its type's)."""
        if self.max_nodes < self.min_nodes:
            return "max_nodes", f"must be >= min_nodes ({self.min_nodes}), got {self.max_nodes}"
        if not self.run_id:
            return "run_id", "must not be empty"
        return None

    def rendezvous(self) -> RendezvousSettings:
        """The c10d rendezvous settings these knobs imply."""
        return RendezvousSettings(
            run_id=self.run_id,
            min_nodes=self.min_nodes,
            max_nodes=self.max_nodes,
            join_timeout=self.join_timeout,
            last_call_timeout=self.last_call_timeout,
            close_timeout=self.close_timeout,
            heartbeat_timeout=self.heartbeat_timeout,
            keep_alive_interval=self.keep_alive_interval,
            keep_alive_max_attempt=self.keep_alive_max_attempt,
        )
