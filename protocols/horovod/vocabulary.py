"""Horovod's trace as the checks read it: its driver's rank assignments (its resets), its
discovery and blacklist, and its workers' failures in the protocol-neutral vocabulary
(``elastic_sim.trace_kinds``). Plain data, read by ``elastic_sim.vocabulary``; the kinds
every protocol records alike (``rdzv_done``, ``step``, ``commit``...) need no entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fields = Mapping[str, Any]


def _host(slot: object) -> str:
    """The host of a discovery entry (``host:slots``)."""
    return str(slot).split("/", 1)[0].split(":", 1)[0]


def _assigned(host: str, d: Fields) -> dict[str, Any]:
    rendezvous = d.get("rendezvous")  # the first world is rendezvous 1; each later, a reset
    return {"round": rendezvous, "ranks": d.get("ranks"),
            "resets": rendezvous - 1 if isinstance(rendezvous, int) else None}


EVENTS: dict[str, tuple[str, Callable[[str, Fields], dict[str, Any] | None]]] = {
    "hvd_assign": ("epoch_assigned", _assigned),
    "hvd_discovery": ("offered", lambda host, d: {
        "hosts": [_host(h) for h in d.get("hosts", [])]}),
    "hvd_blacklist": ("evict", lambda host, d: {
        "host": d.get("target"), "until": d.get("cooldown_end")}),
    "hvd_scheduled_exit": ("injected_failure", lambda host, d: {}),
    "hvd_exit": ("worker_error", lambda host, d: {"error": d.get("error")}),
    "hvd_abort": ("abort", lambda host, d: {"error": d.get("error")}),
}
"""Recorded kind -> (its neutral kind, its neutral fields)."""
