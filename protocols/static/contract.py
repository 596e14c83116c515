"""What the static protocol promises: every check but its one known weak spot, as long as
the store's host survives, its connections to the store hold (its store clients, like
TCPStore's, never reconnect: a ``conn_reset`` of them fails every host that uses one),
partitions are whole (it picks a round's members by arrival, not by who can reach whom: a
bridged or one-way partition can leave a cut pair in every round) and at least
``min_hosts`` hosts survive. Plain data, read by ``elastic_sim.checks.contracts``."""

ASSUMPTIONS = ("coordinator_survives", "store_connections_hold", "no_partial_partitions",
               "min_hosts_survive")
"""Fault assumptions the promises hold under."""

WEAK_SPOTS: dict[str, str] = {
    "members_alive_at_completion": "a host that dies after writing its arrival stays in the "
    "round's membership; the round fails at group creation and the next one forms without "
    "it (found/static_scale_down-members_alive_at_completion)",
}
"""Check -> why the protocol breaks it, by design (any other violation is a bug)."""
