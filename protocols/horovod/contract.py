"""What the Horovod model promises: every check, except upstream's known weak spots (each
with the mechanism that breaks it), as long as the driver's host survives and at least
``min_np`` slots' hosts do. Plain data, read by ``elastic_sim.checks.contracts``."""

ASSUMPTIONS = ("coordinator_survives", "min_hosts_survive")
"""Fault assumptions the promises hold under."""

WEAK_SPOTS: dict[str, str] = {
    "terminates": "a worker host that crashes after its spawn connected holds the reset "
    "barrier until TCP keepalive gives up, about 2 h (found/horovod "
    "worker_host_crash_blocks_reset_barrier); ranks that enter different collectives "
    "stall for good (found/horovod removed_host_replaced_survivors_skip_sync); a worker's "
    "failure recorded just as the barrier action starts deadlocks the driver "
    "(horovod/failure_during_barrier_action_deadlocks_driver), and one recorded while that "
    "action stops the job waits in the spent barrier for good, so horovodrun never returns "
    "(horovod/failure_recorded_as_the_job_stops_hangs_horovodrun)",
    "progress_after_faults": "the same blocked reset barrier, stalled mismatched "
    "collectives, the deadlocked driver, or a job failed by workers aborting in init, makes "
    "no progress after the fault",
    "collective_sequence": "survivors skip the sync after a removal-only update while a "
    "fresh rank syncs (found/horovod removed_host_replaced_survivors_skip_sync)",
    "reset_callback_state": "reset callbacks run before the sync and read the rank's own "
    "state (horovod/reset_callback_sees_pre_sync_state)",
    "healthy_hosts_kept": "a worker whose ssh session died while it lives is recorded FAILURE "
    "and then READY, one barrier party too many: the early trip's world never forms and a "
    "healthy host is blacklisted (horovod/ssh_sessions_killed_while_workers_live); so is a "
    "rank_and_size GET retried after a reset of its connection, whose ssh session the reset "
    "ended (horovod/conn_reset_of_a_rank_request_counts_a_slot_twice)",
    "eventual_incorporation": "a host change is notified to the old rank 0 until the reset "
    "moves the coordinator, even when rank 0's host is gone: three connect timeouts under "
    "the discovery lock delay the reset (horovod/notification_to_dead_coordinator_holds_reset)",
    "committed_progress": "a rank that restores after a failed sync discards the model it "
    "was just sent (found/horovod fresh_rank_restore_discards_synced_model)",
    "clean_shutdown": "a worker whose ssh session ended while it lives (its host's sshd "
    "signalled, the driver's connection reset) is recorded FAILURE; that record waits in "
    "the reset barrier until the finishing ranks' SUCCESS trips it and stops the driver, so "
    "its 255 lands in the results and horovodrun exits 1 after a completed training "
    "(found/horovod ssh_session_lost_fails_completed_job)",
    "avoidable_job_failure": "a worker's non-zero exit outside the elastic run loop (an "
    "abort in init) fails the whole job (found/horovod driver_freeze_at_start_aborts_workers; "
    "survivors aborting in re-initialisation, horovod/survivors_abort_in_reinit_after_peer_died"
    "); a reset of the driver's ssh sessions fails every slot "
    "(horovod/conn_reset_of_driver_connections_fails_job)",
}
"""Check -> why upstream (Horovod 0.28) breaks it: violations a user should expect."""
