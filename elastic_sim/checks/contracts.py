"""Per-protocol contracts: what each protocol model promises (every check but its declared
weak spots) and under which fault assumptions, so a violation reads as "the protocol broke
its own promise", "upstream's known weak spot" or "outside the contract" (the faults broke
an assumption). The declarations are plain data in ``protocols/<name>/contract.py``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from elastic_sim.checks.facts import (
    HOST_FAULTS,
    STORE_ENDS,
    cut_groups,
    host_of,
    knobs_of,
    protocol_named,
    run_limits,
    run_start,
)
from elastic_sim.checks.verdict import CheckResult
from elastic_sim.faults.model import ENDS_A_HOST
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import every_protocol

Standing = Literal["kept", "broken_promise", "weak_spot", "outside_contract", "n/a"]
LOST_FOR_GOOD = tuple(c.scenario_type for c in ENDS_A_HOST)
"""Fault types after which a host does not come back."""


@dataclass(frozen=True)
class Contract:
    """One protocol's promise: every check but ``weak_spots``, under ``assumptions``."""

    protocol: str
    assumptions: tuple[str, ...]
    weak_spots: Mapping[str, str]


def contract_for(protocol: str) -> Contract | None:
    """The contract ``protocols/<protocol>/contract.py`` declares, or None."""
    try:
        mod = importlib.import_module(f"elastic_sim.protocols.{protocol}.contract")
    except ModuleNotFoundError:
        return None
    return Contract(protocol, tuple(mod.ASSUMPTIONS), dict(mod.WEAK_SPOTS))


def protocol_of(events: Sequence[TraceEvent]) -> str | None:
    """The protocol a trace ran (run_start's, else the built-in one its knobs are of)."""
    named = protocol_named(events)
    if named is not None:
        return named
    claim = every_protocol().claim(knobs_of(events))
    return claim[0] if claim is not None else None


def _coordinator_survives(events: Sequence[TraceEvent]) -> str | None:
    start = run_start(events)
    coord = start.get("coordinator") if start is not None else None
    if not coord:
        return None
    for ev in neutral(events).of("fault"):
        if ev.kind != "fault" or ev.get("phase") != "start":
            continue
        target = ev.get("target")
        groups = cut_groups(ev)
        if groups is not None:
            if any(coord in group for group in groups):
                return f"{ev.get('id')} cuts the coordinator {coord} off"
        elif ev.get("type") in HOST_FAULTS and isinstance(target, str) and (
                host_of(target) == coord):
            return f"{ev.get('id')} ({ev.get('type')}) hits the coordinator {coord}"
    return None


def _min_hosts_survive(events: Sequence[TraceEvent]) -> str | None:
    hist = neutral(events)
    limits = run_limits(hist)
    if limits is None:
        return None
    hosts = {ev.host for ev in hist.of("proc_start") if ev.proc == f"{ev.host}/main"}
    lost = {str(ev.get("target")) for ev in hist.of("fault")
            if ev.get("phase") == "start" and ev.get("type") in LOST_FOR_GOOD}
    if len(hosts - lost) < limits.min_hosts:
        return (f"{len(lost)} of {len(hosts)} hosts lost for good, fewer than the minimum "
                f"{limits.min_hosts} left")
    return None


def _stores_live_with_their_hosts(events: Sequence[TraceEvent]) -> str | None:
    """Broken by a fault that ends a store server while the host that runs it lives on
    (:data:`~elastic_sim.checks.facts.STORE_ENDS`), for a protocol whose stores upstream
    live inside a process that such a fault would take down with them."""
    for ev in neutral(events).of("fault"):
        if ev.get("phase") == "start" and ev.get("type") in STORE_ENDS:
            return (f"{ev.get('id')} ends the store server on {ev.get('target')} while its "
                    "host lives")
    return None


def _store_connections_hold(events: Sequence[TraceEvent]) -> str | None:
    """Broken by a ``conn_reset`` that resets a connection of the coordinator's host (the
    store's) with another host, for a protocol whose store clients, like c10d's TCPStore
    client, never reconnect: every later call of such a client fails."""
    start = run_start(events)
    coord = start.get("coordinator") if start is not None else None
    if not coord:
        return None
    for ev in neutral(events).of("fault"):
        ends = ev.get("target")
        if (ev.get("phase") == "start" and ev.get("type") == "conn_reset"
                and isinstance(ends, list) and (coord in ends or "*" in ends)):
            return f"{ev.get('id')} resets the connections of the store's host {coord}"
    return None


PARTIAL_PARTITIONS = ("bridge", "one_way_partition")
"""Fault types after which hosts that each reach a third may not reach each other."""


def _no_partial_partitions(events: Sequence[TraceEvent]) -> str | None:
    """Broken by a partition that is not whole (:data:`PARTIAL_PARTITIONS`: a bridge, a
    one-way cut), for a protocol that picks a round's members without asking who can reach
    whom: every round may then hold a pair that is cut."""
    for ev in neutral(events).of("fault"):
        if ev.get("phase") == "start" and ev.get("type") in PARTIAL_PARTITIONS:
            return (f"{ev.get('id')} ({ev.get('type')}) leaves hosts that reach a third "
                    "unable to reach each other")
    return None


ASSUMPTIONS: dict[str, Callable[[Sequence[TraceEvent]], str | None]] = {
    "coordinator_survives": _coordinator_survives,
    "min_hosts_survive": _min_hosts_survive,
    "stores_live_with_their_hosts": _stores_live_with_their_hosts,
    "store_connections_hold": _store_connections_hold,
    "no_partial_partitions": _no_partial_partitions,
}
"""Assumption -> a test of one trace: None when it held, else why not."""


@dataclass
class ContractVerdict:
    """How one run stands against its protocol's contract."""

    contract: Contract
    broken_assumptions: dict[str, str] = field(default_factory=dict)
    standing: dict[str, Standing] = field(default_factory=dict)
    """Check name -> its standing."""

    def names(self, standing: Standing) -> list[str]:
        """The checks with this standing, in check order."""
        return [n for n, s in self.standing.items() if s == standing]


def standing_of(contract: Contract, result: CheckResult, within: bool) -> Standing:
    """One check's standing: kept (or n/a), a weak spot, a broken promise, or outside the
    contract when the run's faults broke an assumption."""
    if result.ok:
        return "kept" if result.applicable else "n/a"
    if result.name in contract.weak_spots:
        return "weak_spot"
    return "broken_promise" if within else "outside_contract"


def judge(events: Sequence[TraceEvent], results: Sequence[CheckResult]) -> ContractVerdict | None:
    """The run's standing against its protocol's contract (None: no contract known)."""
    protocol = protocol_of(events)
    contract = contract_for(protocol) if protocol is not None else None
    if contract is None:
        return None
    verdict = ContractVerdict(contract)
    for name in contract.assumptions:
        why = ASSUMPTIONS[name](events)
        if why is not None:
            verdict.broken_assumptions[name] = why
    within = not verdict.broken_assumptions
    for res in results:
        verdict.standing[res.name] = standing_of(contract, res, within)
    return verdict
