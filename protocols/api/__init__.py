"""The runtime contract: the only thing protocol code may import.

Protocol code is plain ``async def`` code that awaits operations of a :class:`Runtime`
handed to it. The simulator drives these coroutines on virtual time; the real runtime
drives the very same coroutines on asyncio over TCP, a TCPStore and Gloo. Between two
awaits a coroutine runs atomically in both runtimes, so interleavings happen only at
awaits.

A runtime implements the abstract ``_``-methods; everything a protocol calls that can be
written once (tracing of collectives, the sync primitives in :mod:`elastic_sim.protocols.sync`) is
written here once, so both runtimes behave and trace identically.

Import every name from this package (``from elastic_sim.protocols.api import Runtime``);
its modules are one concept each:

- :mod:`~elastic_sim.protocols.api.errors`: the errors, part of the contract because elastic
  protocols live in their error paths;
- :mod:`~elastic_sim.protocols.api.concurrency`: :class:`Future`, :class:`Task` and :class:`Timer`;
- :mod:`~elastic_sim.protocols.api.message`: :data:`JSON` and :class:`Message`;
- :mod:`~elastic_sim.protocols.api.store`: the key-value store with c10d TCPStore semantics;
- :mod:`~elastic_sim.protocols.api.group`: process groups, one per membership epoch, traced alike;
- :mod:`~elastic_sim.protocols.api.process`: child processes, signals, exit statuses;
- :mod:`~elastic_sim.protocols.api.runtime`: :class:`Runtime` itself, who a process is, discovery
  faults, and process entries.
"""

from __future__ import annotations

from elastic_sim.protocols.api.concurrency import Future, T, Task, Timer
from elastic_sim.protocols.api.errors import (
    Cancelled,
    CollectiveError,
    CollectiveFailed,
    CollectiveTimeout,
    OperationTimeout,
    ProcessExited,
    StoreConnectionError,
    StoreError,
    StoreTimeout,
)
from elastic_sim.protocols.api.group import (
    Group,
    Negotiation,
    Received,
    Sendable,
    StretchResult,
    TracedGroup,
    blamed,
)
from elastic_sim.protocols.api.message import JSON, Message
from elastic_sim.protocols.api.process import (
    HANDLED_SIGNALS,
    SIGNAL_NUMBERS,
    SIGNALS,
    Proc,
    exit_status,
)
from elastic_sim.protocols.api.runtime import (
    NO_DISCOVERY_FAULTS,
    DiscoveryOverlay,
    Entry,
    KernelSockets,
    ProcessInfo,
    Runtime,
    resolve_entry,
    yield_point,
)
from elastic_sim.protocols.api.store import PrefixStore, Store

__all__ = [
    "HANDLED_SIGNALS",
    "JSON",
    "NO_DISCOVERY_FAULTS",
    "SIGNALS",
    "SIGNAL_NUMBERS",
    "Cancelled",
    "CollectiveError",
    "CollectiveFailed",
    "CollectiveTimeout",
    "DiscoveryOverlay",
    "Entry",
    "Future",
    "Group",
    "KernelSockets",
    "Message",
    "Negotiation",
    "OperationTimeout",
    "PrefixStore",
    "Proc",
    "ProcessExited",
    "ProcessInfo",
    "Received",
    "Runtime",
    "Sendable",
    "Store",
    "StoreConnectionError",
    "StoreError",
    "StoreTimeout",
    "StretchResult",
    "T",
    "Task",
    "Timer",
    "TracedGroup",
    "blamed",
    "exit_status",
    "resolve_entry",
    "yield_point",
]
