"""The base of every fault type: the :class:`Fault` dataclass whose subclasses register
themselves in :data:`FAULT_TYPES` by their ``tag``, the field domains (pydantic-annotated
types), the host mixins, placement and a runtime's :class:`Refusal`/:func:`handler_for`.

The fault types themselves live in sibling modules by family; :mod:`elastic_sim.faults.model`
imports them in declaration order (which is :data:`FAULT_TYPES`'s order) and is where every
other module takes them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import Field

FAULT_TYPES: dict[str, type[Fault]] = {}
"""Scenario name -> fault class, in declaration order (each class registers itself)."""

Time = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""Seconds of run time, or a non-negative span (finite)."""
Duration = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A span that must be positive (finite)."""
Offset = Annotated[float, Field(allow_inf_nan=False)]
"""Signed finite seconds (a clock step)."""
Probability = Annotated[float, Field(ge=0, le=1)]
HostName = Annotated[str, Field(min_length=1)]
HostList = Annotated[tuple[HostName, ...], Field(min_length=1)]
Side = Annotated[tuple[HostName, ...], Field(min_length=1)]


NEEDED = MappingProxyType({"needed": True})
"""Metadata of a field the scenario must give (its default only keeps the dataclass
legal: a field after one with a default needs one)."""


@dataclass(frozen=True)
class Refusal:
    """A runtime's handler for a fault type it cannot inject: the reason, said before or
    when the fault is due."""

    reason: str


H = TypeVar("H")


def handler_for(table: Mapping[type[Fault], H], cls: type[Fault]) -> H | None:
    """A runtime's handler for fault class ``cls`` in its ``table``: its own, else its
    nearest base's (isolate, isolate_store and bridge share the partition's)."""
    for klass in cls.__mro__:
        found = table.get(klass)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Placement:
    """What a fault is placed against: the cluster's hosts, in order, and the store host."""

    hosts: tuple[str, ...]
    store_host: str


@dataclass(frozen=True)
class Fault:
    """Base: something that happens to the world at run time ``at``."""

    id: str
    at: float

    scenario_type: ClassVar[str] = ""
    """The scenario name of the type (set by the ``tag`` a subclass is declared with)."""
    derived: ClassVar[tuple[str, ...]] = ()
    """Fields a scenario does not give: :meth:`resolve` computes them."""
    ends_host: ClassVar[bool] = False
    """Whether it takes the host it names out for good: every process there ends, and none
    starts there again unless a ``scale_up`` adds the host anew. The one place this is said
    (:data:`elastic_sim.faults.model.ENDS_A_HOST`): a search never aims such a fault at a
    spare host and counts it against ``max_crashes``, and a contract counts its host as
    lost for good."""
    tells_to_leave: ClassVar[bool] = False
    """Whether it tells its host's processes to end (a signal, a notice of preemption or
    scale-down) where other faults end them unannounced: what the host does next is its
    leaving, not a failure of the job."""
    device: ClassVar[str] = ""
    """The ``cluster.device`` it needs ("": any): a scenario on another device is refused
    (a GPU fault on a CPU cluster), and a search there does not draw it."""

    def __init_subclass__(cls, tag: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if tag:
            if tag in FAULT_TYPES:
                raise TypeError(f"fault type {tag!r} defined twice")
            cls.scenario_type = tag
            FAULT_TYPES[tag] = cls

    @property
    def type(self) -> str:
        """The scenario name of this fault type."""
        return self.scenario_type or type(self).__name__

    @property
    def heals_at(self) -> float | None:
        """When the fault ends, if it does."""
        return None

    def hosts(self) -> tuple[str, ...]:
        """The hosts this fault names (validated against the cluster)."""
        return ()

    def resolve(self, place: Placement) -> Fault:
        """This fault with its derived fields filled in for a cluster."""
        return self

    def problem(self) -> tuple[str, str] | None:
        """A cross-field rule this fault breaks: (field, what was expected), else None."""
        return None

    def target(self) -> Any:
        """What its trace event names as the target (plain JSON data)."""
        return getattr(self, "host", None)

    def where(self) -> str:
        """The host its trace event is on (``*``: no one host)."""
        host = getattr(self, "host", "")
        return host if isinstance(host, str) and host else "*"


class OnHost:
    """Mixin: a fault that names one host (``host``)."""

    host: str

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)


class Healing:
    """Mixin: a fault that heals ``duration`` seconds after it starts."""

    at: float
    duration: float

    @property
    def heals_at(self) -> float | None:
        return self.at + self.duration


def _replace(f: Fault, **changes: Any) -> Fault:
    return replace(f, **changes)
