"""Horovod's trace as the checks read it: its driver's rank assignments (its resets), its
registry's reset barrier, its discovery and blacklist, and its workers' failures in the
protocol-neutral vocabulary
(``elastic_sim.trace_kinds``), and its knobs as the limits they promise. Plain data, read
by ``elastic_sim.vocabulary``; the kinds every protocol records alike (``rdzv_done``,
``step``, ``commit``...) need no entry."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from elastic_sim.protocols.horovod.hosts import parse_host_slots

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
    "hvd_record": ("barrier_enter", lambda host, d: {
        "round": d.get("rendezvous"), "party": d.get("slot"), "parties": d.get("parties")}),
    "hvd_trip": ("barrier_trip", lambda host, d: {
        "round": d.get("rendezvous"), "entered": sorted(d.get("states") or {})}),
    "hvd_discovery": ("offered", lambda host, d: {
        "hosts": [_host(h) for h in d.get("hosts", [])]}),
    "hvd_blacklist": ("evict", lambda host, d: {
        "host": d.get("target"), "until": d.get("cooldown_end")}),
    "hvd_scheduled_exit": ("injected_failure", lambda host, d: {}),
    "hvd_exit": ("worker_error", lambda host, d: {"error": d.get("error")}),
    "hvd_abort": ("abort", lambda host, d: {"error": d.get("error")}),
    "reset_callback": ("reset_hook", lambda host, d: {
        k: d.get(k) for k in ("round", "rank", "size", "epoch", "step", "digest")}),
}
"""Recorded kind -> (its neutral kind, its neutral fields)."""

KNOB = "reset_limit"
"""A knob only Horovod's knobs have."""


def limits(knobs: Fields) -> dict[str, Any]:
    """What the knobs promise: ``min_np`` .. ``max_np`` slots as hosts (the fewest hosts
    that hold ``min_np`` slots, the most that ``max_np`` slots can use, by the slots
    discovery offers per host), ``reset_limit``
    resets for the job, and the time a new world takes to form (discovery's period, twice,
    its wait, a worker's start, the Gloo timeout and the kill grace) and to detect a
    failure (the longest of the Gloo, elastic and connect timeouts). A host up within the
    elastic timeout still counts; a dead host is seen only through an exit code or a
    timeout (no heartbeat); hosts are offered by discovery; a world lists a host once per
    slot."""

    def num(name: str) -> float:
        v = knobs.get(name)
        return float(v) if isinstance(v, (int, float)) else 0.0

    offered = _slots_offered(knobs)
    min_np = knobs.get("min_np") or knobs.get("np", 1)
    max_np = knobs.get("max_np")
    reset_limit = knobs.get("reset_limit")
    settle = (2 * num("discovery_period") + num("discovery_wait")
              + num("process_start_latency") + num("gloo_timeout") + num("kill_grace"))
    detect = max(num("gloo_timeout"), num("elastic_timeout"), num("connect_timeout"))
    return {"min_hosts": math.ceil(int(min_np) / max(offered)),
            "max_hosts": None if max_np is None else max(int(max_np) // min(offered), 1),
            "restart_budget": reset_limit if isinstance(reset_limit, int) else None,
            "budget_per_host": False, "settle_s": settle, "progress_s": detect + settle,
            "wait_s": num("elastic_timeout"),
            "progress_by": f"max(gloo_timeout, elastic_timeout, connect_timeout) {detect:g} s"
                           f" + a new world's discovery, start and Gloo periods {settle:g} s",
            "rejoin_s": None, "rejoin_by": "", "discovered": True, "slots_listed": True}


def _slots_offered(knobs: Fields) -> list[int]:
    """The slot counts discovery can offer a host (``host:slots`` lines of its fixed list,
    its schedule and its random source; a bare name has ``slots_per_host``)."""
    default = max(int(knobs.get("slots_per_host", 1) or 1), 1)
    spec = knobs.get("discovery")
    lines: list[str] = []
    if isinstance(spec, Mapping):
        lines += [str(h) for h in spec.get("hosts") or ()]
        for step in spec.get("schedule") or ():
            if isinstance(step, Mapping):
                lines += [str(h) for h in step.get("hosts") or ()]
        random = spec.get("random")
        if isinstance(random, Mapping):
            lines += [str(h) for h in random.get("hosts") or ()]
    return [max(n, 1) for n in parse_host_slots(lines, default).values()] or [default]
