"""What the torchft model promises: every check, except upstream's known weak spots (each
with the mechanism that breaks it), as long as the Lighthouse's host survives, at least
``min_replicas`` replica groups do, and no store server dies while its host lives. Plain
data, read by ``elastic_sim.checks.contracts``.

Assumptions and simplifications of the model, beyond the fault assumptions:

- gRPC and HTTP calls are request and reply messages with a deadline: a call to a
  process that is gone waits out its deadline, where upstream's fails at once on a
  refused connection (a heal whose source died before it answered costs the recovering
  rank the call's timeout instead of an immediate error); a Manager server's heartbeat
  is fire and forget (upstream's waits for its reply, and on a dead TCP connection for
  HTTP/2 keep-alive);
- the ranks of a replica group hold one replicated model (their shards are not told
  apart), and they do not talk to each other except through the Manager server (no
  intra-replica process group);
- the HTTP checkpoint transfer is a point-to-point group of the two ranks over the
  source's store; one source serves several recovering ranks in parallel, each at the
  link's full bandwidth;
- the Lighthouse stops once the job ended and no replica heartbeats (the operator's
  teardown; upstream's runs until it is killed);
- whether a restarted replica group's other ranks read the Manager address from the
  group's store before its rank 0 has written its new one is one seeded draw per restart
  (``restart_race_lost``, 0.65), the same for all of them: upstream it is a race between
  the ranks' starts (measured with torchrun 2.13 and torchft 0.2.0 on Gloo: some other
  rank read the previous attempt's address at 8 of 13 restarts of groups of two ranks and
  7 of 10 of groups of four, where the ranks of one restart did not always agree;
  scripts/torchft_restart_race, scenarios/torchft/restarted_rank_reads_old_manager_address).
"""

ASSUMPTIONS = ("coordinator_survives", "min_hosts_survive", "stores_live_with_their_hosts")
"""Fault assumptions the promises hold under. The third: a replica group's store is
torchrun's, served from inside its agent process, so upstream it cannot die while the
agent lives; the model's ``store_crash`` ends the server alone, a fault upstream cannot
have (scenarios/torchft/primary_store_crash). The agent itself can die while its ranks
live on, and the store with it: that is upstream's (the ``ft_liveness`` weak spot)."""

WEAK_SPOTS: dict[str, str] = {
    "ft_data_position_agreement": "the data position is not part of what a heal "
    "transfers: a replica healed from a source that dropped a step's batch (a failed "
    "step) is one batch behind it (torchft issue #309, and the DistributedSampler's "
    "documented loss of batches on rejoining; scenarios/torchft/data_position_not_healed)",
    "ft_single_heal_source": "compute_quorum_results gives recovering replica i's group "
    "rank g the up-to-date replica (i + g) mod n: the ranks of one replica group heal from "
    "different sources (RFC #343; scenarios/torchft/heal_sources_per_rank)",
    "members_alive_at_completion": "a replica whose quorum request timed out, or that died "
    "after asking, stays a participant until the next quorum is issued, and counts while "
    "its heartbeat is younger than the timeout: a quorum can include it (and reach "
    "min_replicas with it)",
    "ft_fault_isolation": "a replica group's launcher keeps its store across restarts, "
    "so a restarted group of two or more ranks whose rank 1 reads the Manager address "
    "before rank 0 has written its new one reaches the previous attempt's dead server and "
    "never joins; its new server heartbeats, so the Lighthouse waits the join timeout for "
    "it while the other groups' quorum requests time out, and their launchers restart "
    "them into the same race (measured with torchrun 2.13 and torchft 0.2.0; scenarios/"
    "torchft/restarted_rank_reads_old_manager_address)",
    "ft_group_recovers": "the same race at each start of a restarted group of two or "
    "more ranks: a group that loses it fails and is started again into it, and one that "
    "loses it until its restarts are spent, or whose lost starts keep the Lighthouse "
    "waiting while the other groups' quorum requests time out, is lost for the rest of "
    "the job on a healthy host (upstream loses it at about 65 % of restarts; "
    "scenarios/torchft/restarted_group_never_returns)",
    "ft_liveness": "every group's process group is set up over the store of the "
    "quorum's primary (the first replica at the top step), which lives in that group's "
    "torchrun agent: an agent that dies while its rank lives on (a stray signal) leaves "
    "every reconfiguration failing on its dead store, and no step is committed again "
    "(scenarios/torchft/agent_killed_leaves_quorum_on_dead_store); a dead replica kept "
    "as a quorum participant (members_alive_at_completion) costs a process-group init "
    "timeout on top of the collective's",
    "terminates": "a replica group that comes back after the others finished, or that "
    "only a dead participant could make a quorum with, waits out the quorum timeout on "
    "every start of its launcher (max_restarts x 60 s by default) before it gives up",
}
"""Check -> why upstream (torchft 0.2.0) breaks it: violations a user should expect."""
