"""Torchelastic's trace as the checks read it: its rounds, its agents' restarts and its
exit barrier in the protocol-neutral vocabulary (``elastic_sim.trace_kinds``). Plain data,
read by ``elastic_sim.vocabulary``; the kinds every protocol records alike (``rdzv_done``,
``step``, ``commit``...) need no entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fields = Mapping[str, Any]

FAILURE_RESTARTS = ("FAILED", "UNHEALTHY")
"""``agent_restart`` reasons that a worker failure caused (``nodes_waiting``, a membership
change, spends no restart)."""


def _decided(host: str, d: Fields) -> dict[str, Any]:
    return {k: d[k] for k in ("round", "members") if k in d}


def _restart(host: str, d: Fields) -> dict[str, Any]:
    reason = d.get("reason")
    return {"failure": reason in FAILURE_RESTARTS, "spent": reason != "nodes_waiting",
            "left": d.get("remaining_restarts")}


EVENTS: dict[str, tuple[str, Callable[[str, Fields], dict[str, Any] | None]]] = {
    "rdzv_complete": ("epoch_decided", _decided),
    "agent_state": ("restarts_left", lambda host, d: {"left": d.get("remaining_restarts")}),
    "agent_restart": ("restart", _restart),
    "workers_started": ("restart_count", lambda host, d: {
        "round": d.get("round"), "count": d.get("restart_count")}),
    "exit_barrier_enter": ("barrier_enter", lambda host, d: {
        "round": d.get("round"), "party": host, "parties": d.get("world_size")}),
    "exit_barrier_done": ("barrier_trip", lambda host, d: {"round": d.get("round")}),
    "exit_barrier_failed": ("barrier_fail", lambda host, d: {"error": d.get("error")}),
    "rdzv_shutdown": ("rendezvous_closed", lambda host, d: {} if d.get("closed") else None),
    "rdzv_shutdown_failed": ("rendezvous_close_failed",
                             lambda host, d: {"error": d.get("error")}),
}
"""Recorded kind -> (its neutral kind, its neutral fields; None: not one)."""
