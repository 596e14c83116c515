"""What the torchelastic model promises: every check, except upstream's known weak spots
(each with the mechanism that breaks it), as long as the rendezvous store's host survives
and at least ``min_nodes`` hosts do. Plain data, read by ``elastic_sim.checks.contracts``."""

ASSUMPTIONS = ("coordinator_survives", "min_hosts_survive")
"""Fault assumptions the promises hold under."""

WEAK_SPOTS: dict[str, str] = {
    "members_alive_at_completion": "a participant that dies or freezes before its round "
    "completes stays in it until its heartbeat expires (found/torchelastic "
    "dead_participant_completes_round)",
    "master_agreement": "the agent hosting the shared store keeps its cached bootstrap "
    "master while a new rank 0 publishes its own (found/torchelastic "
    "stale_bootstrap_master_after_rank0_hang)",
    "membership_agreement": "a frozen store host's late keep-alive sweep splits a round "
    "(found/torchelastic store_host_freeze_sweeps_members_out, clock_skew)",
    "rank_validity": "the same split round gives ranks outside the agreed order",
    "limits": "the same split round forms below min_nodes",
    "healthy_hosts_kept": "the same sweep leaves live hosts that asked to join out of the "
    "round it forms (an agent whose clock steps ahead: found/torchelastic "
    "clock_jump_sweeps_live_peers_out_of_the_world)",
    "avoidable_job_failure": "one agent's local error (a store timeout in rank assignment "
    "or in reading a stale MASTER_ADDR: findings 1 and 31) ends launch_agent, which fails "
    "the job",
    "rendezvous_closed_by_job_end": "launch_agent's finally closes the rendezvous for "
    "everyone after its own agent's failure, a SIGINT in the first rendezvous included "
    "(found/torchelastic sigint_in_first_rendezvous_closes_it_before_a_late_host)",
    "clean_shutdown": "the store host's agent leaves first and takes the store with it: "
    "the others' exit barrier or rendezvous close fails after a completed job (finding 14)",
    "restart_accounting": "max_restarts is per agent: a newcomer's workers are told "
    "restart 0 next to veterans', and agents that fail in turn absorb more failures "
    "than max_restarts (finding 30)",
    "no_restart_loop": "rounds whose workers never initialise (a stale master) restart "
    "until the budget is spent",
    "progress_after_faults": "survivors of a dead participant re-rendezvous only once "
    "their collective times out (found/torchelastic "
    "survivors_wait_out_the_group_timeout_after_a_crash); the same loops, or a job failed "
    "at once, make no progress after the fault",
    "terminates": "a spare left on the wait list keeps the others restarting "
    "(found/torchelastic hot_spare_wait_list_livelock)",
    "eventual_incorporation": "a host swept out of a round while its store was frozen is "
    "not brought back",
    "no_pointless_reconfiguration": "a node left on the wait list makes every round restart, "
    "and the next one forms with the same members and ranks (the hot_spare_wait_list_livelock "
    "mechanism; reached by the issue 13 campaign through a clock_jump of a spare)",
}
"""Check -> why upstream (torch 2.13) breaks it: violations a user should expect."""
