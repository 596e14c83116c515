"""A job's start at scale, as torchrun 2.13 does it, up to the workers' ranks: every agent
creates its c10d rendezvous handler (the store host's serves the store; every state
read and write pays the state's pickling, ``state_codec_cost`` plus
``state_codec_cost_per_node`` per node, as the full agent does), joins the first round and
assigns its workers' ranks through the round's store (upstream's O(n) rank assignment
since pytorch#124982: one write and one read per agent, group rank 0 reads every agent's
role and writes every agent's ranks). The full agent goes on to start its workers; at
thousands of hosts the simulated workers cost more than the question needs, so this entry
stops at the ranks. Each agent records ``ranks_assigned``; a scenario naming this entry
(``studies/rendezvous_4000_hosts.yaml``) measures the rendezvous at a size.

The store host's agent also watches the round form: every ``WATCH_S`` it reads the state
key as any client does (one ``get``: a few hundredths of a percent of the store's load at
thousands of hosts) and records ``rdzv_participants`` (the round, whether it is complete,
its participants, the wait list and the heartbeats held), so that a size at which no
round forms still says how far it got and where it settles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.torchelastic.agent_ranks import assign_ranks
from elastic_sim.protocols.torchelastic.backend import C10dBackend
from elastic_sim.protocols.torchelastic.launcher import create_handler, knobs_of
from elastic_sim.protocols.torchelastic.ops import RendezvousError
from elastic_sim.protocols.torchelastic.state import RendezvousState

WATCH_S = 1.0
"""How often the store host's agent reads the rendezvous state for ``rdzv_participants``."""


async def _watch(rt: Runtime, backend: C10dBackend) -> None:
    """Record the stored state's size every :data:`WATCH_S` until the round completes."""
    while True:
        await rt.sleep(WATCH_S)
        try:
            got = await backend.get_state()
        except RendezvousError:
            continue
        if got is None:
            continue
        state = RendezvousState.decode_shared(got[0])
        rt.record("rdzv_participants", round=state.round, complete=state.complete,
                  participants=len(state.participants), waiting=len(state.wait_list),
                  heartbeats=len(state.last_heartbeats))
        if state.complete:
            return


async def job_start(rt: Runtime, args: Mapping[str, Any]) -> int:
    """One agent's start: rendezvous, then rank assignment; 0 when both succeeded."""
    knobs = knobs_of(args.get("knobs", {}))
    store_host = str(args["store_host"])
    try:
        handler = await create_handler(rt, knobs, store_host)
        if rt.host == store_host:
            rt.spawn(_watch(rt, handler.backend), name="watch")
        info = await handler.next_rendezvous()
    except RendezvousError as exc:
        rt.record("job_failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    rt.record("rdzv_done", round=info.round, rank=info.rank, world_size=info.world_size)
    ranks = await assign_ranks(info.store, info.rank, info.world_size, knobs.nproc_per_node,
                               knobs.identical_workers)
    rt.record("ranks_assigned", round=info.round, base_rank=ranks.base_global_rank,
              world_size=ranks.global_world_size)
    # leave once every agent has its ranks: closing earlier would fail a slower one
    done = await info.store.add("study/started", 1)
    while done < info.world_size:
        await rt.sleep(0.5)
        done = await info.store.add("study/started", 0)
    closed = await handler.shutdown()
    rt.record("rdzv_shutdown", closed=closed)
    if rt.host == store_host:
        await rt.sleep(1.0)  # keep serving while the others close
    return 0
