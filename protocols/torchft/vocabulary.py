"""torchft's trace as the checks read it. Its quorums, votes and heals are its own (the
``ft_*`` checks read them as recorded); what it shares with the other protocols is its
replica launcher (upstream: torchrun with ``--max_restarts`` per replica group), which
restarts a group's ranks when one of them fails: a restart caused by a failure, spending
the group's budget. Plain data, read by ``elastic_sim.vocabulary``.

It names no ``KNOB``/``limits``: torchft promises no world-size bounds or settle time in
the shape the generic capacity and progress checks judge (a quorum forms per step, and
its liveness bound is ``ft_liveness``'s own), so those checks leave a torchft run n/a."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fields = Mapping[str, Any]

def _restart(host: str, d: Fields) -> dict[str, Any] | None:
    """A start after the first is a restart, and only a rank's failure causes one (the
    failure that ends the budget starts nothing, so it is no restart)."""
    attempt = d.get("attempt")
    if not isinstance(attempt, int) or attempt < 1:
        return None
    return {"failure": True, "spent": True, "left": None}


EVENTS: dict[str, tuple[str, Callable[[str, Fields], dict[str, Any] | None]]] = {
    "ft_replica_start": ("restart", _restart),
}
"""Recorded kind -> (its neutral kind, its neutral fields)."""
