"""Torchelastic's trace as the checks read it: its rounds, its agents' restarts and its
exit barrier in the protocol-neutral vocabulary (``elastic_sim.trace_kinds``), and its
knobs as the limits they promise. Plain data, read by ``elastic_sim.vocabulary``; the
kinds every protocol records alike (``rdzv_done``, ``step``, ``commit``...) need no entry."""

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

KNOB = "max_restarts"
"""A knob only torchelastic's knobs have."""

SYNC_DELAY = 1.0
"""Seconds upstream's rendezvous waits after deciding to poll (``_delay(1)``, fixed)."""
STATE_CACHE = 1.0
"""Seconds a node answers from its cached rendezvous state (``cache_duration``, fixed)."""
FIRST_CALL_JITTER = 0.3
"""The most a ``next_rendezvous`` waits first while its state's round is 0
(``uniform(0, 0.3)``)."""


def limits(knobs: Fields) -> dict[str, Any]:
    """What the knobs promise: ``min_nodes`` .. ``max_nodes`` hosts, ``max_restarts`` per
    agent, and the times of a recovery. A round forms within its polling, last-call and
    keep-alive periods, twice, plus the heartbeat expiry and the process-group timeout a
    host back from a fault waits out first (the settle time). A job progresses or ends
    within each phase of a recovery once: the failure seen (the process-group or store
    read timeout), the workers stopped, a round formed or the join deadline passed. And
    once a member's host has died, the survivors can see it when its heartbeat expires:
    they re-form within that expiry, the last call and their polls."""

    def num(name: str) -> float:
        v = knobs.get(name)
        return float(v) if isinstance(v, (int, float)) else 0.0

    def s(x: float) -> str:
        return f"{x:g} s"

    expiry = num("keep_alive_interval") * max(num("keep_alive_max_attempt"), 1.0)
    periods = num("monitor_interval") + num("last_call_timeout") + expiry
    settle = 2 * periods + num("heartbeat_timeout") + num("pg_timeout")
    detect = max(num("pg_timeout"), num("read_timeout"))
    forming = 2 * periods + num("heartbeat_timeout")
    wait = max(num("join_timeout"), forming)
    polls = 2 * (num("monitor_interval") + SYNC_DELAY + STATE_CACHE) + FIRST_CALL_JITTER
    rejoin = expiry + num("last_call_timeout") + polls
    return {"min_hosts": int(knobs.get("min_nodes", 1)),
            "max_hosts": int(knobs.get("max_nodes", 1)),
            "restart_budget": int(knobs["max_restarts"]), "budget_per_host": True,
            "settle_s": settle, "progress_s": detect + num("stop_timeout") + wait,
            "wait_s": num("join_timeout"),
            "progress_by": f"max(pg_timeout {s(num('pg_timeout'))}, read_timeout "
                           f"{s(num('read_timeout'))}) + stop_timeout "
                           f"{s(num('stop_timeout'))} + max(join_timeout "
                           f"{s(num('join_timeout'))}, a round's periods {s(forming)})",
            "rejoin_s": rejoin,
            "rejoin_by": f"the heartbeat expiry keep_alive_interval x keep_alive_max_attempt "
                         f"{s(expiry)} + last_call_timeout {s(num('last_call_timeout'))} + "
                         f"polls {s(polls)}",
            "discovered": False, "slots_listed": False}
