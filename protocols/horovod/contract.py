"""What the Horovod model promises: every check, except upstream's known weak spots (each
with the mechanism that breaks it), as long as the driver's host survives and at least
``min_np`` slots' hosts do. Plain data, read by ``elastic_sim.checks.contracts``."""

ASSUMPTIONS = ("coordinator_survives", "min_hosts_survive")
"""Fault assumptions the promises hold under."""

WEAK_SPOTS: dict[str, str] = {
    "terminates": "a worker host that crashes after its spawn connected holds the reset "
    "barrier until TCP keepalive gives up, about 2 h (found/horovod "
    "worker_host_crash_blocks_reset_barrier)",
    "progress_after_faults": "the same blocked reset barrier, or a job failed by workers "
    "aborting in init, makes no progress after the fault",
    "committed_progress": "a rank that restores after a failed sync discards the model it "
    "was just sent (found/horovod fresh_rank_restore_discards_synced_model)",
    "avoidable_job_failure": "a worker's non-zero exit outside the elastic run loop (an "
    "abort in init) fails the whole job (found/horovod driver_freeze_at_start_aborts_workers)",
    "collective_sequence": "a removal-only update makes the survivors skip the sync that a "
    "fresh rank of the same reset broadcasts (found/horovod "
    "removed_host_replaced_survivors_skip_sync, finding 17)",
}
"""Check -> why upstream (Horovod 0.28) breaks it: violations a user should expect."""
