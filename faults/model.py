"""Fault types as data. Each runtime has its own injector for the same vocabulary.

Every fault has an ``id`` (unique in its schedule, used in the trace and the report) and a
time ``at`` (seconds of run time); faults that heal carry a ``duration``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fault:
    """Base: something that happens to the world at run time ``at``."""

    id: str
    at: float

    @property
    def type(self) -> str:
        """The scenario name of this fault type."""
        return FAULT_TYPES_BY_CLASS[type(self)]

    @property
    def heals_at(self) -> float | None:
        """When the fault ends, if it does."""
        return None

    def hosts(self) -> tuple[str, ...]:
        """The hosts this fault names (validated against the cluster)."""
        return ()


@dataclass(frozen=True)
class CrashHost(Fault):
    """The machine dies: every process on it ends at once (SIGKILL), messages to it vanish,
    a store it hosts is gone."""

    host: str = ""

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)


@dataclass(frozen=True)
class CrashProcess(Fault):
    """One process dies (SIGKILL); the host and its other processes live on."""

    proc: str = ""
    """``host/name``."""

    def hosts(self) -> tuple[str, ...]:
        return (self.proc.split("/", 1)[0],)


@dataclass(frozen=True)
class HangHost(Fault):
    """The machine freezes (SIGSTOP of every process) for ``duration`` seconds, then resumes."""

    host: str = ""
    duration: float = 0.0

    @property
    def heals_at(self) -> float | None:
        return self.at + self.duration

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)


@dataclass(frozen=True)
class Partition(Fault):
    """The network is cut between ``groups`` (hosts in different groups cannot talk) for
    ``duration`` seconds; hosts in no group stay connected to everyone."""

    groups: tuple[tuple[str, ...], ...] = ()
    duration: float = 0.0

    @property
    def heals_at(self) -> float | None:
        return self.at + self.duration

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for g in self.groups for h in g)

    def cut(self, a: str, b: str) -> bool:
        """Whether hosts ``a`` and ``b`` are on different sides of the cut."""
        ga = next((i for i, g in enumerate(self.groups) if a in g), None)
        gb = next((i for i, g in enumerate(self.groups) if b in g), None)
        return ga is not None and gb is not None and ga != gb


FAULT_TYPES: dict[str, type[Fault]] = {
    "crash": CrashHost,
    "crash_process": CrashProcess,
    "hang": HangHost,
    "partition": Partition,
}
"""Scenario name -> fault class."""

FAULT_TYPES_BY_CLASS: dict[type[Fault], str] = {v: k for k, v in FAULT_TYPES.items()}
