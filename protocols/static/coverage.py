"""The static protocol's abstract state, as a search's coverage reads it from the trace:
per host, where it is in the rendezvous and in training. Plain data, read by
``elastic_sim.coverage``, which adds what every protocol shares (the round a host is in,
the faults on it, how its processes end).

``EVENTS`` maps a recorded kind to the component it sets and the value: a literal, or
``=field`` (the event's field, one of the values ``COMPONENTS`` lists for it)."""

COMPONENTS: dict[str, tuple[str, ...]] = {
    "rdzv": ("joining", "member", "rejected", "failed", "leaving"),
    "training": ("syncing", "training", "collective_failed", "group_failed", "restored"),
}
"""Each component of a host's state and the values it takes."""

EVENTS: dict[str, tuple[str, str]] = {
    "rdzv_join": ("rdzv", "joining"),
    "rdzv_done": ("rdzv", "member"),
    "rdzv_rejected": ("rdzv", "rejected"),
    "rdzv_failed": ("rdzv", "failed"),
    "rdzv_leave": ("rdzv", "leaving"),
    "group_init": ("training", "syncing"),
    "sync": ("training", "training"),
    "coll_fail": ("training", "collective_failed"),
    "group_failed": ("training", "group_failed"),
    "restore": ("training", "restored"),
}
"""Recorded kind -> (component, value)."""
