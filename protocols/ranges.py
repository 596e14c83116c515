"""The ranges of a scenario's numbers: types that say what a number means (a duration, a
period, a count) and the documented limits of what the simulation can hold.

Every float is finite (upstream turns its seconds into ``timedelta``, which refuses NaN
and infinity; JSON cannot carry them). A duration is ``>= 0``; a period or an interval,
something a loop waits between its turns, is ``> 0``: the simulation charges no CPU time,
so a loop that waits 0 s would run forever at one instant of virtual time. Counts are
bounded where the simulation allocates per unit (a process per worker, the bytes of the
state it broadcasts).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

MAX_HOSTS = 100_000
"""Hosts in one cluster (the rendezvous benchmarks go to 10,000)."""
MAX_PROCS_PER_HOST = 1024
"""Worker processes (torchrun's ``--nproc-per-node``) or slots (Horovod) of one host: more
than any machine has cores; each is a simulated process with its tasks."""
MAX_PROCS = 1_000_000
"""Processes in one world (hosts times processes per host): what one simulation holds in
memory (about 10 KiB each at rest)."""
MAX_STATE_BYTES = 1 << 30
"""Bytes of the training state a sync broadcasts: the simulation builds the blob, so it
must fit in memory several times over (1 GiB)."""

LIMITS: dict[float, str] = {
    MAX_HOSTS: "MAX_HOSTS, the documented limit of hosts in one cluster",
    MAX_PROCS_PER_HOST: "MAX_PROCS_PER_HOST, the documented limit of processes per host: "
                        "each is a simulated process",
    MAX_STATE_BYTES: "MAX_STATE_BYTES: the simulation builds the state blob it broadcasts",
    65535: "the largest TCP port",
}
"""Why a documented upper bound is there, by its value (error messages cite it)."""

Finite = Annotated[float, Field(allow_inf_nan=False)]
"""Any finite number."""
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A duration or a timeout: finite, ``>= 0``."""
Period = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""What a loop waits between turns, or a timeout upstream requires to be positive:
finite, ``> 0``."""
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A positive finite quantity (a bandwidth, a rate)."""
Probability = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
"""A probability in [0, 1]."""
Count = Annotated[int, Field(ge=0)]
"""A count that may be zero."""
PosCount = Annotated[int, Field(ge=1)]
"""A count of at least one."""
HostCount = Annotated[int, Field(ge=1, le=MAX_HOSTS)]
"""Hosts (or agents, nodes) of a world: ``1..MAX_HOSTS``."""
ProcsPerHost = Annotated[int, Field(ge=1, le=MAX_PROCS_PER_HOST)]
"""Processes or slots of one host: ``1..MAX_PROCS_PER_HOST``."""
StateBytes = Annotated[int, Field(ge=0, le=MAX_STATE_BYTES)]
"""Size of the broadcast state: ``0..MAX_STATE_BYTES``."""
Port = Annotated[int, Field(ge=0, le=65535)]
"""A TCP port (0: any free one)."""


def limit_note(ctx: dict[str, Any] | None) -> str:
    """Why an upper bound in a pydantic error's context is there ('' if not documented)."""
    for key in ("le", "lt"):
        if ctx is not None and ctx.get(key) in LIMITS:
            return f" ({LIMITS[ctx[key]]})"
    return ""
