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

from elastic_sim.protocols.torchelastic.state import RendezvousSettings


@dataclass(frozen=True)
class TorchElasticKnobs:
    """What a torchrun command line and its environment set, in seconds where timed."""

    min_nodes: int = 1
    """``--nnodes MIN:MAX``: the smallest world a round may form with."""
    max_nodes: int = 1
    """``--nnodes MIN:MAX``: a round completes at once when this many have joined."""
    nproc_per_node: int = 1
    """Workers per agent (``--nproc-per-node``)."""
    run_id: str = "none"
    """``--rdzv-id`` (the CLI's default is the literal string "none")."""
    # The rendezvous timeouts take their upstream defaults from RendezvousSettings.
    join_timeout: float = RendezvousSettings.join_timeout
    last_call_timeout: float = RendezvousSettings.last_call_timeout
    close_timeout: float = RendezvousSettings.close_timeout
    heartbeat_timeout: float = RendezvousSettings.heartbeat_timeout
    keep_alive_interval: float = RendezvousSettings.keep_alive_interval
    keep_alive_max_attempt: int = RendezvousSettings.keep_alive_max_attempt
    read_timeout: float = 60.0
    """Rendezvous TCPStore client timeout (connect, get, wait)."""
    store_port: int = 29400
    """Port of the rendezvous store on the store host (``--rdzv-endpoint``'s port)."""
    monitor_interval: float = 0.1
    """``--monitor-interval``: the agent polls its workers this often."""
    max_restarts: int = 0
    """``--max-restarts``: torchrun CLI default 0 (``LaunchConfig``'s default is 3)."""
    shutdown_timeout: float = 30.0
    """SIGTERM -> SIGKILL grace when the agent shuts down (a death signal, or leaving
    ``run()``): ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``."""
    stop_timeout: float = 30.0
    """SIGTERM -> SIGKILL grace when stopping workers for a restart, or the rest of the
    group after one failed: fixed at 30 s upstream (``PContext.close``'s default), not
    affected by ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``."""
    exit_barrier_timeout: float = 300.0
    """How long a succeeded agent waits for the others before exiting anyway."""
    pg_timeout: float = 1800.0
    """Workers' process-group timeout (``default_pg_timeout``, 30 min): a hung peer is
    noticed after this."""
    share_store: bool = True
    """Shared agent store (default since 2.5): rank 0's agent hosts the store the workers
    bootstrap from. False = ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: every round's
    rank-0 worker hosts its own store on a fresh port."""
    identical_workers: bool = False
    """``TORCH_ELASTIC_WORKER_IDENTICAL=1``: ranks computed locally, no store traffic."""

    def problem(self) -> tuple[str, str] | None:
        """The first knob that upstream would reject, as (knob, message), or None."""
        if self.min_nodes < 1:
            return "min_nodes", f"must be >= 1, got {self.min_nodes}"
        if self.max_nodes < self.min_nodes:
            return "max_nodes", f"must be >= min_nodes ({self.min_nodes}), got {self.max_nodes}"
        if self.nproc_per_node < 1:
            return "nproc_per_node", f"must be >= 1, got {self.nproc_per_node}"
        if not self.run_id:
            return "run_id", "must not be empty"
        for name in ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
                     "keep_alive_interval", "read_timeout", "monitor_interval", "pg_timeout"):
            if getattr(self, name) <= 0:
                return name, f"must be > 0, got {getattr(self, name)}"
        for name in ("shutdown_timeout", "stop_timeout", "exit_barrier_timeout",
                     "keep_alive_max_attempt", "max_restarts"):
            if getattr(self, name) < 0:
                return name, f"must be >= 0, got {getattr(self, name)}"
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
