"""The static protocol's trace as the checks read it: it records only the kinds every
protocol records alike (``rdzv_done``, ``sync``, ``step``, ``commit``...), neutral as they
are, so it maps none; its knobs, as the limits they promise. Plain data, read by
``elastic_sim.vocabulary``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fields = Mapping[str, Any]

EVENTS: dict[str, tuple[str, Callable[[str, Fields], dict[str, Any] | None]]] = {}
"""Recorded kind -> (its neutral kind, its neutral fields): none of its own is read."""

KNOB = "min_hosts"
"""A knob only the static protocol's knobs have."""


def limits(knobs: Fields) -> dict[str, Any]:
    """What the knobs promise: ``min_hosts`` .. ``max_hosts``, no restart budget, and the
    time a round takes to form (the last call, twice, plus the group and store timeouts
    a host back from a fault waits out first, seeing its stale group and store calls fail)
    and to detect a failure (the longest of the group, store and join timeouts). A host up
    within the join timeout still counts; a dead host is seen only through a timeout."""

    def num(name: str) -> float:
        v = knobs.get(name)
        return float(v) if isinstance(v, (int, float)) else 0.0

    settle = 2 * num("last_call") + num("group_timeout") + num("store_timeout")
    detect = max(num("group_timeout"), num("store_timeout"), num("join_timeout"))
    return {"min_hosts": int(knobs["min_hosts"]), "max_hosts": int(knobs.get("max_hosts", 1 << 30)),
            "restart_budget": None, "budget_per_host": False, "settle_s": settle,
            "progress_s": detect + settle, "wait_s": num("join_timeout"),
            "progress_by": f"max(group_timeout, store_timeout, join_timeout) {detect:g} s + "
                           f"a round's last calls and timeouts {settle:g} s",
            "rejoin_s": None, "rejoin_by": "", "discovered": False, "slots_listed": False}
