"""Fault types on the links, clocks, store and collectives around the hosts: conn_reset,
link (with the :class:`BetweenHosts` mixin), clock_skew, clock_jump, store_crash,
store_freeze and collective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from elastic_sim.faults.base import (
    NEEDED,
    Duration,
    Fault,
    Healing,
    HostName,
    Offset,
    OnHost,
    Placement,
    Probability,
    Time,
    _replace,
)


class BetweenHosts:
    """Mixin: a fault on the traffic between hosts ``a`` and ``b`` (``*``: any host)."""

    a: str
    b: str

    def hosts(self) -> tuple[str, ...]:
        return tuple(h for h in (self.a, self.b) if h != "*")

    def applies(self, x: str, y: str) -> bool:
        """Whether traffic between hosts ``x`` and ``y`` (either direction) crosses it."""
        def end(pat: str, h: str) -> bool:
            return pat == "*" or pat == h
        return (end(self.a, x) and end(self.b, y)) or (end(self.a, y) and end(self.b, x))

    def target(self) -> Any:
        return [self.a, self.b]

    def where(self) -> str:
        return "*"


@dataclass(frozen=True)
class ConnReset(BetweenHosts, Fault, tag="conn_reset"):
    """Every established connection between hosts ``a`` and ``b`` (``*``: any host; never a
    host's loopback) is reset (RST) at once, while new ones can be opened: a store client's
    calls fail with a connection error (c10d's client does not reconnect), a process group
    with such a pair fails its calls on both ends (Gloo's pair sees ECONNRESET) and its
    other members see them leave. Unlike a partition, nothing is dropped afterwards."""

    a: HostName = "*"
    b: HostName = "*"


@dataclass(frozen=True)
class LinkFault(BetweenHosts, Healing, Fault, tag="link"):
    """A bad link between hosts ``a`` and ``b`` (``*``: any host) for ``duration`` seconds:
    ``delay`` extra one-way seconds; messages lost with probability ``loss``, duplicated with
    ``duplicate``, and delayed by up to ``reorder`` extra seconds (so they overtake each
    other). Loss, duplication and reordering apply to messages; connection-based traffic
    (store, collectives) sees the delay only."""

    a: HostName = "*"
    b: HostName = "*"
    delay: Time = 0.0
    loss: Probability = 0.0
    duplicate: Probability = 0.0
    reorder: Time = 0.0
    duration: Duration = field(default=0.0, metadata=NEEDED)



@dataclass(frozen=True)
class ClockSkew(OnHost, Healing, Fault, tag="clock_skew"):
    """The host's wall clock is ``offset`` seconds off for ``duration`` seconds, then set
    right again (two steps of the wall clock; the monotonic clock never steps)."""

    host: HostName
    offset: Offset
    duration: Duration


@dataclass(frozen=True)
class ClockJump(OnHost, Fault, tag="clock_jump"):
    """The host's wall clock steps by ``delta`` seconds for good (NTP step, ``date -s``)."""

    host: HostName
    delta: Offset


@dataclass(frozen=True)
class StoreCrash(OnHost, Fault, tag="store_crash"):
    """The store server on ``host`` (default: the store host) dies; the process that hosted
    it lives on."""

    host: str = ""

    def resolve(self, place: Placement) -> Fault:
        return self if self.host else _replace(self, host=place.store_host)


@dataclass(frozen=True)
class StoreFreeze(OnHost, Healing, Fault, tag="store_freeze"):
    """The store server on ``host`` (default: the store host) stops answering for
    ``duration`` seconds (requests wait, and time out on the clients' own timeouts), then
    serves what waited."""

    host: str = ""
    duration: Duration = field(default=0.0, metadata=NEEDED)

    def resolve(self, place: Placement) -> Fault:
        return self if self.host else _replace(self, host=place.store_host)


@dataclass(frozen=True)
class CollectiveFault(OnHost, Fault, tag="collective"):
    """The next collective a process of ``host`` enters (from ``at`` on) fails at once on that
    member (``mode`` "fail": it aborts, peers see a dead peer) or never completes (``mode``
    "hang": every member times out)."""

    host: HostName
    mode: Literal["fail", "hang"] = "fail"
