"""Knobs of the torchft model (torchft 0.2.0: the Lighthouse, the Manager and its server,
the HTTP checkpoint transport, a replica group's launcher and the bundled training loop),
each with upstream's default and where it comes from.

Two upstream entry points disagree on one default: ``join_timeout`` is 60 s for the
``torchft_lighthouse`` command line (``--join_timeout_ms 60000``, src/lighthouse.rs
``LighthouseOpt``) and 100 ms for the Python binding ``LighthouseServer(bind,
min_replicas)`` (src/lib.rs: ``join_timeout_ms.unwrap_or(100)``). A scenario runs the
Lighthouse as its own process, so the default here is the command line's 60 s; a scenario
that means the Python binding (torchft's own tests do) says ``join_timeout: 0.1``.

The Lighthouse runs on the scenario's ``cluster.store_host``; every other host is one
replica group of ``ranks_per_replica`` ranks, started and restarted by a torchrun-like
launcher (torchft/torchx.py ``hsdp``: one ``torchrun --nnodes=1`` per replica group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from elastic_sim.protocols.ranges import (
    Count,
    Period,
    Port,
    PosCount,
    Probability,
    ProcsPerHost,
    Seconds,
)


@dataclass(frozen=True)
class TorchFTKnobs:
    """What the Lighthouse command line, the ``Manager(...)`` arguments (or their
    ``TORCHFT_*`` environment variables) and each replica group's launcher set; seconds
    where timed (upstream takes milliseconds on the Lighthouse's command line and
    ``timedelta`` in Python)."""

    # -- the Lighthouse (src/lighthouse.rs LighthouseOpt) ---------------------------------
    min_replicas: PosCount = 1
    """``--min_replicas`` (replicas): a quorum that is not fast needs at least this many
    heartbeating participants. Required upstream (no default); 1 here."""
    join_timeout: Seconds = 60.0
    """``--join_timeout_ms`` (default 60000 ms on the command line; 100 ms in the Python
    ``LighthouseServer`` binding): once a valid quorum could form, how long the Lighthouse
    waits, from the first participant's request, for heartbeating replicas that have not
    asked for a quorum yet (stragglers)."""
    quorum_tick: Period = 0.1
    """``--quorum_tick_ms`` (default 100 ms): how often the Lighthouse looks for a quorum
    besides at each quorum request."""
    heartbeat_timeout: Period = 5.0
    """``--heartbeat_timeout_ms`` (default 5000 ms): a replica whose last heartbeat (or
    quorum request) is at least this old is not healthy."""

    # -- the Manager (torchft/manager.py Manager.__init__) --------------------------------
    min_replica_size: PosCount = 1
    """``Manager(min_replica_size=...)`` (replicas, required upstream; 1 here): a replica
    votes against committing a step that fewer than this many replicas at the max step
    took part in."""
    use_async_quorum: bool = True
    """``Manager(use_async_quorum=True)``: the quorum (and a heal) runs in the background
    during the forward pass; off, ``start_quorum`` waits for it and applies a heal at once."""
    timeout: Period = 60.0
    """``Manager(timeout=timedelta(seconds=60))`` or ``TORCHFT_TIMEOUT_SEC``: the
    should_commit and checkpoint-metadata calls, the checkpoint transfer and its lock."""
    quorum_timeout: Period = 60.0
    """``Manager(quorum_timeout=timedelta(seconds=60))`` or ``TORCHFT_QUORUM_TIMEOUT_SEC``:
    one quorum request (a rank to its Manager server, the server to the Lighthouse)."""
    connect_timeout: Period = 60.0
    """``Manager(connect_timeout=timedelta(seconds=60))`` or
    ``TORCHFT_CONNECT_TIMEOUT_SEC``: how long a new Manager server retries reaching the
    Lighthouse (src/net.rs ``connect``: back-off from 100 ms by 1.5x up to 10 s)."""
    heartbeat_interval: Period = 0.1
    """``Manager(heartbeat_interval=timedelta(milliseconds=100))``: the Manager server's
    heartbeats to the Lighthouse."""
    quorum_retries: Count = 0
    """``Manager(quorum_retries=0)`` or ``TORCHFT_QUORUM_RETRIES``: retries of a failed
    Lighthouse quorum request (src/manager.rs ``_quorum_with_retries``). At 0 a request to
    a dead Lighthouse is never retried and the ranks' requests wait out their timeout."""
    max_retries: Count | None = None
    """``Manager(max_retries=None)``: consecutive should_commit failures a rank takes
    before raising (None: retries forever)."""
    init_sync: bool = True
    """``Manager(init_sync=True)``: at max step 0 every replica but the store's primary
    heals from it (src/manager.rs ``compute_quorum_results``)."""
    shrink_only: bool = False
    """``start_quorum(shrink_only=False)``: with any participant asking, a quorum keeps
    only members of the previous one (no newcomers)."""
    pg_timeout: Period = 60.0
    """``ProcessGroupGloo(timeout=timedelta(seconds=60))`` (torchft/process_group.py
    ``ProcessGroupWrapper``): reconfiguring the cross-replica group and its collectives."""

    # -- each replica group's launcher (torchft/torchx.py hsdp -> torchrun) ---------------
    ranks_per_replica: ProcsPerHost = 1
    """``hsdp(workers_per_replica=1)`` (torchrun ``--nproc_per_node``): ranks of one replica
    group; rank i of every replica group forms quorum's process group i."""
    replica_restarts: Count = 10
    """``hsdp(max_restarts=10)`` (torchrun ``--max_restarts``): how often a replica group's
    launcher starts its ranks again after one fails (each start is a new replica id)."""
    restart_race_lost: Probability = 0.65
    """Sim only: the chance that, at a restarted replica group's start, its other ranks read
    the Manager address from the group's store (which the launcher keeps across restarts)
    before its rank 0 has written the new one, and so reach the previous start's dead
    server. Upstream it is a race between the ranks' starts; measured with torchrun 2.13
    and torchft 0.2.0 on Gloo (``scripts/torchft_restart_race``): some other rank read the
    stale address at 8 of 13 restarts of groups of 2 ranks and 7 of 10 of groups of 4, 15
    of 23. The launcher draws it once per restart of a group (from its process's seeded
    generator), so the group's ranks lose or win together; where they win they start
    ``RACE_WON_AFTER`` s (launcher.py) after rank 0. 1: they lose it at every restart
    (the model before this knob); 0: never."""
    monitor_interval: Period = 0.1
    """torchrun's ``--monitor-interval`` (default 0.1 s): how often the launcher looks at
    its ranks' exit codes."""
    stop_timeout: Seconds = 30.0
    """SIGTERM -> SIGKILL grace when the launcher stops the other ranks after one failed
    (torchrun's ``PContext.close`` default, 30 s)."""
    store_port: Port = 29600
    """The replica group's store (torchrun's ``--master_port``; torchx's hsdp gives replica
    group i port 29600 + i): the Manager's bootstrap keys and, for a quorum whose primary
    it is, the cross-replica process group's rendezvous (``torchft/<quorum id>/<rank>``)."""

    # -- the bundled training loop ---------------------------------------------------------
    stop_on: Literal["steps", "data"] = "steps"
    """When a rank's loop ends: ``steps``, once ``manager.current_step()`` reaches the
    workload's steps (torchft's examples); ``data``, once its replica's shard of the data
    runs out after the workload's steps batches (``for batch in loader``, the loop of
    torchft issue #309)."""

    data_warmup: Seconds = 0.0
    """Seconds the bundled loop's data loader takes to give its first batch (its workers
    starting), after the Manager is up: its server heartbeats meanwhile, so replica groups
    that start a little apart still meet in their first quorum."""

    # -- variants broken on purpose, so the checks can be shown to fail ------------------
    broken_skip_heal: bool = False
    """BROKEN on purpose: a recovering rank fetches the source's state but keeps its own
    (the state checks must catch it)."""
    broken_own_vote: bool = False
    """BROKEN on purpose: the Manager server answers each rank's should_commit with that
    rank's own vote instead of the replica group's unanimous one."""
    broken_new_id_always: bool = False
    """BROKEN on purpose: the Lighthouse gives every quorum it issues a new id."""
    broken_no_split_brain_rule: bool = False
    """BROKEN on purpose: the Lighthouse issues a quorum without a majority of the
    heartbeating replicas."""
    broken_heartbeats_never_expire: bool = False
    """BROKEN on purpose: the Lighthouse counts every replica that ever heartbeat as
    healthy, so a dead one keeps a quorum waiting for it."""
