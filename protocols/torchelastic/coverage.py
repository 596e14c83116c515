"""Torchelastic's abstract state, as a search's coverage reads it from the trace: per node,
its agent's WorkerState, where it is in the rendezvous, its workers and its exit barrier.
Plain data, read by ``elastic_sim.coverage``, which adds what every protocol shares (the
round a node is in, the faults on it, how its processes end).

``EVENTS`` maps a recorded kind (``kind@main``: on the node's agent only) to the component
it sets and the value: a literal, or ``=field`` (the event's field, one of the values
``COMPONENTS`` lists for it)."""

COMPONENTS: dict[str, tuple[str, ...]] = {
    "agent": ("INIT", "HEALTHY", "UNHEALTHY", "SUCCEEDED", "FAILED", "STOPPED"),
    "rdzv": ("joining", "deciding", "member", "closed", "left", "close_failed",
             "graceful_exit", "keep_alive_failed"),
    "restart": ("FAILED", "UNHEALTHY", "nodes_waiting"),
    "workers": ("started", "syncing", "training", "collective_failed", "group_failed"),
    "barrier": ("waiting", "passed", "failed"),
    "signal": ("TERM", "INT"),
}
"""Each component of a node's state and the values it takes."""

EVENTS: dict[str, tuple[str, str]] = {
    "rdzv_join": ("rdzv", "joining"),
    "rdzv_complete": ("rdzv", "deciding"),
    "rdzv_done": ("rdzv", "member"),
    "rdzv_shutdown": ("rdzv", "left"),
    "rdzv_shutdown_failed": ("rdzv", "close_failed"),
    "rdzv_graceful_exit": ("rdzv", "graceful_exit"),
    "rdzv_keep_alive_failed": ("rdzv", "keep_alive_failed"),
    "agent_state": ("agent", "=state"),
    "agent_restart": ("restart", "=reason"),
    "agent_signal": ("signal", "=signal"),
    "workers_started": ("workers", "started"),
    "group_init": ("workers", "syncing"),
    "sync": ("workers", "training"),
    "coll_fail": ("workers", "collective_failed"),
    "group_failed": ("workers", "group_failed"),
    "exit_barrier_enter": ("barrier", "waiting"),
    "exit_barrier_done": ("barrier", "passed"),
    "exit_barrier_failed": ("barrier", "failed"),
}
"""Recorded kind -> (component, value)."""

