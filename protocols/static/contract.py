"""What the static protocol promises: every check, with no known weak spot, as long as the
store's host survives and at least ``min_hosts`` hosts do. Plain data, read by
``elastic_sim.checks.contracts``."""

ASSUMPTIONS = ("coordinator_survives", "min_hosts_survive")
"""Fault assumptions the promises hold under."""

WEAK_SPOTS: dict[str, str] = {}
"""Check -> why the protocol breaks it (none: a violation is a bug of the protocol)."""
