"""Fault types that change the job's membership or what its discovery source reports:
scale_up, scale_down, discovery_add, discovery_remove, discovery_error, discovery_hang
(:data:`DISCOVERY_FAULTS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import Field

from elastic_sim.faults.base import Duration, Fault, Healing, HostName, OnHost, Time


@dataclass(frozen=True)
class ScaleUp(OnHost, Fault, tag="scale_up"):
    """A new agent starts on ``host`` (one not running yet, or gone): the host's first
    process starts there, as an operator or autoscaler adding a node would."""

    host: HostName


@dataclass(frozen=True)
class ScaleDown(OnHost, Fault, tag="scale_down"):
    """``host`` is taken out of the job: its processes get SIGTERM, SIGKILL after ``grace``,
    and the host is gone."""

    host: HostName
    grace: Time = 0.0
    ends_host: ClassVar[bool] = True
    tells_to_leave: ClassVar[bool] = True


@dataclass(frozen=True)
class DiscoveryAdd(OnHost, Fault, tag="discovery_add"):
    """From ``at`` on, the protocol's discovery source also reports ``host`` (with
    ``slots``; None: the source's default), until ``duration`` seconds later (None: for
    good). Membership grows through discovery, as when a scheduler adds a node."""

    host: HostName
    slots: Annotated[int, Field(ge=1)] | None = None
    duration: Duration | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration

    def line(self) -> str:
        """The ``host[:slots]`` line the discovery script prints for it."""
        return self.host if self.slots is None else f"{self.host}:{self.slots}"


@dataclass(frozen=True)
class DiscoveryRemove(OnHost, Fault, tag="discovery_remove"):
    """From ``at`` on, the protocol's discovery source no longer reports ``host``, until
    ``duration`` seconds later (None: for good); the host itself keeps running."""

    host: HostName
    duration: Duration | None = None

    @property
    def heals_at(self) -> float | None:
        return None if self.duration is None else self.at + self.duration


@dataclass(frozen=True)
class DiscoveryScriptError(Healing, Fault, tag="discovery_error"):
    """Every discovery call made during ``duration`` seconds from ``at`` fails (the
    discovery script exits non-zero)."""

    duration: Duration


@dataclass(frozen=True)
class DiscoveryScriptHang(Healing, Fault, tag="discovery_hang"):
    """A discovery call made during ``duration`` seconds from ``at`` hangs: it returns
    only when the fault heals."""

    duration: Duration


DISCOVERY_FAULTS: tuple[type[Fault], ...] = (
    DiscoveryAdd, DiscoveryRemove, DiscoveryScriptError, DiscoveryScriptHang)
"""Faults that act on a protocol's discovery source (what it reports), not on hosts."""
