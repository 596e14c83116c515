"""Fault types as data: each type is one frozen dataclass, defined once, and this module is
where every other module imports them from.

The class is the whole definition of a fault type: its scenario name (the ``tag`` it is
declared with, which registers it in :data:`FAULT_TYPES`), its fields with their domains
(pydantic constraints in the annotations, which the scenario schema validates YAML against
directly: :mod:`elastic_sim.fault_schema` derives its models from these classes), the
hosts it names, how it is placed in a cluster (:meth:`Fault.resolve`), its cross-field
rules (:meth:`Fault.problem`) and what its trace event names as target
(:meth:`Fault.target`, :meth:`Fault.where`). Each runtime has one handler table over
:data:`FAULT_TYPES` (``elastic_sim.sim.faults``, ``elastic_sim.real.faults.injector``):
inject it, or refuse it with the reason.

Every fault has an ``id`` (unique in its schedule, used in the trace and the report) and a
time ``at`` (seconds of run time); faults that heal carry a ``duration``. A field the
scenario must give but which needs a default here (a dataclass field after one with a
default) carries :data:`NEEDED` as its metadata.

The base (:class:`Fault`, the field domains, the mixins) is :mod:`elastic_sim.faults.base`;
the types are defined by family in :mod:`~elastic_sim.faults.crash_partition`,
:mod:`~elastic_sim.faults.lifecycle`, :mod:`~elastic_sim.faults.links` and
:mod:`~elastic_sim.faults.membership`, imported here in that order: the order the types were
always declared in, so :data:`FAULT_TYPES` (and with it the schema, the README's fault table
and every handler table) keeps its order.
"""

from __future__ import annotations

# The family modules register their types in FAULT_TYPES as they are imported: keep them in
# this order (alphabetical, as isort keeps it, and the order the types were declared in).
from elastic_sim.faults.base import (
    FAULT_TYPES,
    NEEDED,
    Duration,
    Fault,
    Healing,
    HostList,
    HostName,
    Offset,
    OnHost,
    Placement,
    Probability,
    Refusal,
    Side,
    Time,
    handler_for,
)
from elastic_sim.faults.crash_partition import (
    Bridge,
    CrashHost,
    CrashProcess,
    HangHost,
    IsolateHost,
    IsolateStore,
    OneWayPartition,
    Partition,
)
from elastic_sim.faults.lifecycle import (
    CrashAtStart,
    CrashLoop,
    CrashRestart,
    GpuWedge,
    PowerOff,
    Preempt,
    Signal,
    SlowStart,
    Straggler,
    Wedge,
)
from elastic_sim.faults.links import (
    BetweenHosts,
    ClockJump,
    ClockSkew,
    CollectiveFault,
    ConnReset,
    LinkFault,
    StoreCrash,
    StoreFreeze,
)
from elastic_sim.faults.membership import (
    DISCOVERY_FAULTS,
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    ScaleDown,
    ScaleUp,
)

ENDS_A_HOST: tuple[type[Fault], ...] = tuple(c for c in FAULT_TYPES.values() if c.ends_host)
"""The types that take a host out for good (:attr:`Fault.ends_host`), in declaration order."""

__all__ = [
    "DISCOVERY_FAULTS",
    "ENDS_A_HOST",
    "FAULT_TYPES",
    "NEEDED",
    "BetweenHosts",
    "Bridge",
    "ClockJump",
    "ClockSkew",
    "CollectiveFault",
    "ConnReset",
    "CrashAtStart",
    "CrashHost",
    "CrashLoop",
    "CrashProcess",
    "CrashRestart",
    "DiscoveryAdd",
    "DiscoveryRemove",
    "DiscoveryScriptError",
    "DiscoveryScriptHang",
    "Duration",
    "Fault",
    "GpuWedge",
    "HangHost",
    "Healing",
    "HostList",
    "HostName",
    "IsolateHost",
    "IsolateStore",
    "LinkFault",
    "Offset",
    "OnHost",
    "OneWayPartition",
    "Partition",
    "Placement",
    "PowerOff",
    "Preempt",
    "Probability",
    "Refusal",
    "ScaleDown",
    "ScaleUp",
    "Side",
    "Signal",
    "SlowStart",
    "StoreCrash",
    "StoreFreeze",
    "Straggler",
    "Time",
    "Wedge",
    "handler_for",
]
