"""Pure decisions over hosts and slots: parsing discovery output, host order, rank
assignment, update classification, and blacklisting with cooldown (discovery.py, hosts.py
and driver.py of horovod.runner, as plain functions over plain data)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from dataclasses import asdict, dataclass, replace
from enum import IntFlag
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Rng(Protocol):
    """The part of a seeded random stream (``rt.rng``) that decisions draw from."""

    def random(self) -> float:
        """Uniform in [0, 1)."""

    def shuffle(self, x: MutableSequence[Any]) -> None:
        """Permute in place."""

    def choice(self, seq: Sequence[T]) -> T:
        """One element."""


class HostUpdateResult(IntFlag):
    """What a discovery change did: bits for removed and added (both: mixed)."""

    no_update = 0
    removed = 1
    added = 2
    mixed = 3


@dataclass(frozen=True)
class SlotInfo:
    """A slot's place in a world: global, local and cross ranks and sizes."""

    hostname: str
    rank: int
    local_rank: int
    cross_rank: int
    size: int
    local_size: int
    cross_size: int

    def to_json(self) -> dict[str, Any]:
        """Plain data for a message."""
        return asdict(self)

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SlotInfo:
        """Inverse of :meth:`to_json`."""
        return SlotInfo(**{k: obj[k] for k in SlotInfo.__dataclass_fields__})


INVALID_SLOT = SlotInfo("", -1, -1, -1, -1, -1, -1)
"""What ``rank_and_size`` answers a slot that has no place in the new world."""


def parse_host_slots(lines: Iterable[str], default_slots: int) -> dict[str, int]:
    """Discovery output (``host:slots`` or bare ``host`` per line; blank lines ignored) as
    ``{host: slots}`` in first-seen order (upstream deduplicates lines through a set)."""
    out: dict[str, int] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        host, sep, n = line.partition(":")
        out[host] = int(n) if sep else default_slots
    return out


def order_hosts(
    prev_order: Sequence[str], available: Iterable[str], rng: Rng | None
) -> list[str]:
    """Surviving hosts keep their relative order; new hosts are appended in upstream's
    ``set`` iteration order, modelled as a seeded permutation (None: sorted order)."""
    avail = list(dict.fromkeys(available))
    kept = [h for h in prev_order if h in avail]
    new = sorted(h for h in avail if h not in prev_order)
    if rng is not None:
        rng.shuffle(new)
    return kept + new


def host_assignments(
    order: Sequence[str], slots: Mapping[str, int], min_np: int, max_np: int | None
) -> tuple[dict[str, list[SlotInfo]], list[SlotInfo]]:
    """Ranks host by host in ``order``, local ranks within a host, capped at ``max_np``;
    ``ValueError`` when fewer than ``min_np`` slots result."""
    placed: list[tuple[str, int]] = []
    for host in order:
        for local_rank in range(slots[host]):
            if max_np is not None and len(placed) == max_np:
                break
            placed.append((host, local_rank))
    if len(placed) < min_np:
        raise ValueError(f"not enough slots: {len(placed)} < min_np {min_np}")
    local_size: dict[str, int] = {}
    cross_size: dict[int, int] = {}
    for host, lr in placed:
        local_size[host] = local_size.get(host, 0) + 1
        cross_size[lr] = cross_size.get(lr, 0) + 1
    seen_cross: dict[int, int] = {}
    by_host: dict[str, list[SlotInfo]] = {}
    ranked = []
    for rank, (host, lr) in enumerate(placed):
        cross_rank = seen_cross.get(lr, 0)
        seen_cross[lr] = cross_rank + 1
        info = SlotInfo(host, rank, lr, cross_rank, len(placed), local_size[host],
                        cross_size[lr])
        by_host.setdefault(host, []).append(info)
        ranked.append(info)
    return by_host, ranked


def classify_update(
    cur: Mapping[str, int], prev: Mapping[str, int], resurrected: Iterable[str] = ()
) -> HostUpdateResult:
    """Compare two discovery outputs: a host gone or with fewer slots is a removal; a new
    host, one with more slots, or one coming back from a cooldown is an addition."""
    back = set(resurrected)
    res = HostUpdateResult.no_update
    for h in prev:
        if h not in cur:
            res |= HostUpdateResult.removed
    for h, n in cur.items():
        if h not in prev or n > prev[h]:
            res |= HostUpdateResult.added
        elif n < prev[h]:
            res |= HostUpdateResult.removed
        elif h in back:
            res |= HostUpdateResult.added
    return res


@dataclass(frozen=True)
class HostState:
    """A host's blacklist record: blacklisted, until when it cools down, how often."""

    blacklisted: bool = False
    cooldown_end: float = 0.0
    count: int = 0


def blacklist(
    hs: HostState, now: float, cooldown_range: tuple[float, float] | None, jitter: float
) -> tuple[HostState, bool]:
    """Blacklist a host at wall time ``now``; ``jitter`` is a uniform(0, 1) draw. Returns the
    new record and whether the host's processes are to be killed (not when the host was
    already cooling down). The n-th cooldown lasts ``lower * 2**n + jitter * lower``,
    clamped to the range; without a range a blacklist is permanent."""
    hs = replace(hs, blacklisted=True)
    if hs.cooldown_end > now:
        return hs, False
    if cooldown_range is not None:
        lower, upper = cooldown_range
        count = hs.count + 1
        delay = lower * 2**count + jitter * lower
        hs = replace(hs, count=count, cooldown_end=now + max(lower, min(upper, delay)))
    return hs, True


def is_resurrected(hs: HostState, now: float) -> bool:
    """Whether a cooldown has ended (never without a cooldown range)."""
    return hs.cooldown_end > 0 and now >= hs.cooldown_end


def is_excluded(hs: HostState, now: float) -> bool:
    """Left out of the available hosts: blacklisted and not (yet) resurrected."""
    return hs.blacklisted and not is_resurrected(hs, now)


def whitelist(hs: HostState) -> HostState:
    """A resurrected host is usable again (its failure count stays)."""
    return replace(hs, blacklisted=False, cooldown_end=0.0)
