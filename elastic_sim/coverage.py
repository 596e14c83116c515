"""What a run covered, read from its trace: the abstract state of every node as the run went
(each protocol declares its components in ``protocols/<name>/coverage.py``: plain data
mapping its events to them), the transitions between those states, and the faults that
fired (by type and target). A search keeps the schedules that reached something new
(:mod:`elastic_sim.corpus`) and a campaign says what it reached and what it never did.

To a protocol's components every protocol adds the same four: ``round`` (how many rounds
the node has been a member of: r0, r1, r2, r3+), ``fault`` (the classes of the faults on
it now, :data:`elastic_sim.mechanisms.FAULT_CLASS`), ``job`` (done, failed) and
``exit`` (how its first process ended). A node's state is ``component=value`` pairs
joined by ``,``, in the declaration's order; nothing of the sim is instrumented.

A run's coverage is one set of strings: ``s:<host state>`` (a node reached that state),
``t:<state> > <state>`` (a node went from one to the other) and ``f:<type>@<target>``
(a fault fired).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from elastic_sim.mechanisms import FAULT_CLASS, hosts_in
from elastic_sim.trace import TraceEvent

ROUNDS = ("r0", "r1", "r2", "r3+")
SHARED: dict[str, tuple[str, ...]] = {
    "round": ROUNDS,
    "fault": tuple(sorted(set(FAULT_CLASS.values()))),
    "job": ("done", "failed"),
    "exit": ("ok", "error", "killed"),
}
"""The components every protocol's nodes have, and their values."""
SKIP = frozenset({"train_steps", "step", "commit", "coll_enter", "coll_done", "epoch_log",
                  "hvd_lock_held"})
"""Kinds that never change an abstract state (the bulk of a trace), skipped unread."""


@dataclass(frozen=True)
class Declaration:
    """One protocol's components (with their values) and what sets them."""

    components: Mapping[str, tuple[str, ...]]
    events: Mapping[str, tuple[str, str]]

    @property
    def order(self) -> tuple[str, ...]:
        """Every component, the protocol's first, then the shared ones."""
        return (*self.components, *SHARED)


@cache
def declaration(protocol: str | None) -> Declaration:
    """The coverage declaration of ``protocol`` (``protocols/<name>/coverage.py``); a
    protocol without one has the shared components only."""
    try:
        mod = importlib.import_module(f"elastic_sim.protocols.{protocol}.coverage")
    except (ModuleNotFoundError, ValueError, TypeError):
        return Declaration({}, {})
    return Declaration(dict(mod.COMPONENTS), dict(mod.EVENTS))


class _Node:
    """One node's state while the trace is read."""

    def __init__(self, order: Sequence[str]) -> None:
        self.values: dict[str, str] = dict.fromkeys(order, "-")
        self.values["round"] = ROUNDS[0]
        self.rounds = 0
        self.faults: dict[str, str] = {}
        """Active fault id -> its class."""
        self.text = ""

    def state(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values.items() if v != "-")


def reach(events: Iterable[TraceEvent], protocol: str | None) -> frozenset[str]:
    """What a run reached: its nodes' states and transitions and its fired faults."""
    decl = declaration(protocol)
    order = decl.order
    nodes: dict[str, _Node] = {}
    out: set[str] = set()

    def node(host: str) -> _Node:
        n = nodes.get(host)
        if n is None:
            n = nodes[host] = _Node(order)
        return n

    def moved(n: _Node) -> None:
        text = n.state()
        if text != n.text:
            out.add(f"s:{text}")
            if n.text:
                out.add(f"t:{n.text} > {text}")
            n.text = text

    for ev in events:
        kind = ev.kind
        if kind in SKIP:
            continue
        if kind == "fault":
            _fault(ev, node, moved, out)
            continue
        if ev.host in ("", "*"):
            continue
        if kind in decl.events:
            comp, value = decl.events[kind]
            n = node(ev.host)
            n.values[comp] = str(ev.data.get(value[1:], "?")) if value.startswith("=") else value
            if kind == "rdzv_done":
                n.rounds += 1
                n.values["round"] = ROUNDS[min(n.rounds, len(ROUNDS) - 1)]
            moved(n)
        elif kind in ("job_done", "job_failed"):
            n = node(ev.host)
            n.values["job"] = "done" if kind == "job_done" else "failed"
            moved(n)
        elif kind == "proc_exit" and ev.proc == f"{ev.host}/main":
            code = ev.data.get("code")
            n = node(ev.host)
            n.values["exit"] = ("killed" if isinstance(code, int) and code < 0 else
                                "ok" if code == 0 else "error")
            moved(n)
    return frozenset(out)


def _fault(ev: TraceEvent, node: Any, moved: Any, out: set[str]) -> None:
    """A fault event: fired (``f:``), and the fault component of the hosts it names."""
    phase, ftype = ev.data.get("phase"), str(ev.data.get("type", ""))
    hosts = sorted(set(hosts_in(ev.data.get("target"))))
    if phase == "start":
        out.add(f"f:{ftype}@{','.join(hosts) or '*'}")
    if phase not in ("start", "heal"):
        return
    fid = str(ev.data.get("id", ""))
    for h in hosts:
        n = node(h)
        if phase == "start":
            n.faults[fid] = FAULT_CLASS.get(ftype, ftype)
        else:
            n.faults.pop(fid, None)
        n.values["fault"] = "+".join(sorted(set(n.faults.values()))) or "-"
        moved(n)


def split(reached: Iterable[str]) -> dict[str, set[str]]:
    """Coverage by part: ``states``, ``transitions``, ``fired`` and ``mechanisms`` (a
    search counts the mechanisms a case showed as reached too: ``m:``)."""
    out: dict[str, set[str]] = {"states": set(), "transitions": set(), "fired": set(),
                                "mechanisms": set()}
    names = {"s": "states", "t": "transitions", "f": "fired", "m": "mechanisms"}
    for item in reached:
        out[names[item[0]]].add(item[2:])
    return out


def values_reached(states: Iterable[str]) -> set[str]:
    """The ``component=value`` pairs of these states."""
    return {pair for s in states for pair in s.split(",") if pair}


def never_reached(protocol: str | None, states: Iterable[str]) -> list[str]:
    """The declared ``component=value`` pairs no state reached (the shared ``fault``
    classes left out: the fired faults say those)."""
    decl = declaration(protocol)
    seen = values_reached(states)
    every = {**decl.components, **{k: v for k, v in SHARED.items() if k != "fault"}}
    return [f"{c}={v}" for c, values in every.items() for v in values
            if f"{c}={v}" not in seen]


__all__ = ["SHARED", "Declaration", "declaration", "never_reached", "reach", "split",
           "values_reached"]
