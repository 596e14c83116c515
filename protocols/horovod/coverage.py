"""Horovod's abstract state, as a search's coverage reads it from the trace: per host, its
driver's decisions (discovery, rank assignment, the registry barrier's trip, blacklist,
notification) and its workers' place in the elastic run loop. Plain data, read by
``elastic_sim.coverage``, which adds what every protocol shares (the round a host is in,
the faults on it, how its processes end).

``EVENTS`` maps a recorded kind to the component it sets and the value: a literal, or
``=field`` (the event's field, one of the values ``COMPONENTS`` lists for it)."""

COMPONENTS: dict[str, tuple[str, ...]] = {
    "discovery": ("added", "removed", "mixed", "error"),
    "driver": ("assigned", "success", "all_failed", "all_blacklisted", "reset_limit", "reset",
               "stopped", "succeeded", "resume_failed", "spawn_failed", "ssh_failed",
               "rank_and_size_failed"),
    "notify": ("sent", "failed"),
    "blacklist": ("blacklisted",),
    "worker": ("ranked", "syncing", "training", "notified", "interrupted", "restored",
               "aborted", "exited_error", "collective_failed", "group_failed",
               "scheduled_exit"),
}
"""Each component of a host's state and the values it takes."""

EVENTS: dict[str, tuple[str, str]] = {
    "hvd_discovery": ("discovery", "=update"),
    "hvd_discovery_error": ("discovery", "error"),
    "hvd_assign": ("driver", "assigned"),
    "hvd_trip": ("driver", "=decision"),
    "hvd_stop": ("driver", "stopped"),
    "hvd_job_succeeded": ("driver", "succeeded"),
    "hvd_resume_failed": ("driver", "resume_failed"),
    "hvd_spawner_error": ("driver", "spawn_failed"),
    "hvd_ssh_failed": ("driver", "ssh_failed"),
    "hvd_rank_and_size_error": ("driver", "rank_and_size_failed"),
    "hvd_notify": ("notify", "sent"),
    "hvd_notify_failed": ("notify", "failed"),
    "hvd_blacklist": ("blacklist", "blacklisted"),
    "rdzv_done": ("worker", "ranked"),
    "group_init": ("worker", "syncing"),
    "sync": ("worker", "training"),
    "hvd_notified": ("worker", "notified"),
    "hvd_interrupt": ("worker", "interrupted"),
    "restore": ("worker", "restored"),
    "hvd_abort": ("worker", "aborted"),
    "hvd_exit": ("worker", "exited_error"),
    "hvd_scheduled_exit": ("worker", "scheduled_exit"),
    "coll_fail": ("worker", "collective_failed"),
    "group_failed": ("worker", "group_failed"),
}
"""Recorded kind -> (component, value)."""
