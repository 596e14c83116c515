"""The rendezvous's shared state, its settings, and the observer-side sweep.

Wall-clock instants are integer microseconds (upstream uses UTC ``datetime``, whose
resolution is one microsecond), so comparisons are exact and match upstream bit for bit.
Monotonic deadlines are float seconds, as upstream's ``time.monotonic()``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from typing import Any

from elastic_sim.protocols.torchelastic.memo import WriteMemo
from elastic_sim.protocols.torchelastic.nodemap import NodeDesc, NodeMap

__all__ = ["NodeDesc", "NodeMap", "RendezvousSettings", "RendezvousState", "expired_nodes",
           "sweep", "to_us"]

US = 1_000_000


def to_us(seconds: float) -> int:
    """A clock reading in seconds to whole microseconds (the nearest)."""
    return round(seconds * US)


_ONE_US = timedelta(microseconds=1)


def setting_us(seconds: float) -> int:
    """A setting in seconds as the whole microseconds torch holds it: upstream builds a
    ``timedelta(seconds=...)``, which rounds the float's exact decimal value half to even
    (2.5000005 s is 2,500,001 us there, where ``round(2.5000005 * 1e6)`` gives 2,500,000)."""
    return timedelta(seconds=seconds) // _ONE_US


@dataclass(frozen=True)
class RendezvousSettings:
    """Settings with upstream's defaults (seconds)."""

    run_id: str = "none"
    min_nodes: int = 1
    max_nodes: int = 1
    join_timeout: float = 600.0
    last_call_timeout: float = 30.0
    close_timeout: float = 30.0
    heartbeat_timeout: float = 5.0
    keep_alive_interval: float = 5.0
    keep_alive_max_attempt: int = 3

    def __post_init__(self) -> None:
        if not self.run_id:
            raise ValueError("run_id must not be empty")
        if self.min_nodes < 1:
            raise ValueError(f"min_nodes must be >= 1, got {self.min_nodes}")
        if self.max_nodes < self.min_nodes:
            raise ValueError(f"max_nodes ({self.max_nodes}) must be >= min_nodes "
                             f"({self.min_nodes})")
        for name in ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")

    @property
    def keep_alive_interval_us(self) -> int:
        """The heartbeat period in microseconds."""
        return setting_us(self.keep_alive_interval)

    @property
    def last_call_us(self) -> int:
        """The last-call wait in microseconds."""
        return setting_us(self.last_call_timeout)


@dataclass
class RendezvousState:
    """The whole shared state, stored under one key and only written by compare-and-set."""

    round: int = 0
    complete: bool = False
    deadline: int | None = None
    """Last-call deadline, wall-clock microseconds of the writer's clock."""
    closed: bool = False
    participants: NodeMap = field(default_factory=NodeMap)
    wait_list: set[NodeDesc] = field(default_factory=set)
    redundancy_list: set[NodeDesc] = field(default_factory=set)
    last_heartbeats: NodeMap = field(default_factory=NodeMap)
    """Last keep-alive of each node, wall-clock microseconds of the writer's clock."""

    def copy(self) -> RendezvousState:
        """An independent copy. Its two node maps share their chunks with this state's
        until either changes them (:class:`~elastic_sim.protocols.torchelastic.nodemap.NodeMap`)."""
        return RendezvousState(
            self.round, self.complete, self.deadline, self.closed,
            self.participants.copy(), set(self.wait_list), set(self.redundancy_list),
            self.last_heartbeats.copy(),
        )

    def to_json(self) -> dict[str, Any]:
        """Canonical plain data: every collection sorted, so equal states encode equally."""
        return {
            "round": self.round,
            "complete": self.complete,
            "deadline": self.deadline,
            "closed": self.closed,
            "participants": [[*_n(n), r] for n, r in sorted(self.participants.items())],
            "wait_list": [_n(n) for n in sorted(self.wait_list)],
            "redundancy_list": [_n(n) for n in sorted(self.redundancy_list)],
            "last_heartbeats": [[*_n(n), t] for n, t in sorted(self.last_heartbeats.items())],
        }

    def encode(self) -> bytes:
        """Bytes stored in the backend (JSON; upstream pickles, which this project never
        reads off the network): exactly ``json.dumps(self.to_json(), separators=(",", ":"))``.

        Built from per-node JSON fragments instead, since every compare-and-set of every
        node encodes the whole state: in a large round this is the simulator's hot path.
        A node map re-encodes only the chunks changed since it was copied from an encoded
        state (:class:`~elastic_sim.protocols.torchelastic.nodemap.NodeMap`)."""
        parts = self.participants.joined(_ENTRIES)
        waiting = ",".join(map(_MEMBERS.__getitem__, sorted(self.wait_list)))
        spares = ",".join(map(_MEMBERS.__getitem__, sorted(self.redundancy_list)))
        beats = self.last_heartbeats.joined(_ENTRIES)
        return (
            f'{{"round":{_json(self.round)},"complete":{_json(self.complete)},'
            f'"deadline":{_json(self.deadline)},"closed":{_json(self.closed)},'
            f'"participants":[{parts}],"wait_list":[{waiting}],'
            f'"redundancy_list":[{spares}],"last_heartbeats":[{beats}]}}'
        ).encode()

    @staticmethod
    def decode(data: bytes) -> RendezvousState:
        """Inverse of :meth:`encode`; ValueError on corrupt input. The caller owns the result."""
        return RendezvousState.decode_shared(data).copy()

    @staticmethod
    def decode_shared(data: bytes, written: WriteMemo[RendezvousState] | None = None
                      ) -> RendezvousState:
        """:meth:`decode` without the copy: a cached state that the caller must NOT change
        (copy it first). Every node reads the same stored bytes again and again, and most
        only look; in a round of N nodes, a private copy each would be N² memory. Bytes
        held in ``written`` (the states behind the bytes written:
        :class:`~elastic_sim.protocols.torchelastic.executor.StateHolder`) are a lookup."""
        known = None if written is None else written.get(data)
        if known is not None:
            return known
        cached = _DECODED.get(data)
        if cached is None:
            cached = _decode(data)
            _DECODED[data] = cached
            if len(_DECODED) > _DECODE_CACHE_SIZE:
                _DECODED.popitem(last=False)
        else:
            _DECODED.move_to_end(data)
        return cached


_DECODE_CACHE_SIZE = 64
_DECODED: OrderedDict[bytes, RendezvousState] = OrderedDict()
_JSON_CACHE_SIZE = 1 << 17


class _JsonCache(dict[Any, str]):
    """Memoised JSON of a node (``["addr",pid,local_id]``) or of a (node, int) entry
    (``["addr",pid,local_id,value]``): a hit is one C-level dict lookup."""

    def __missing__(self, key: Any) -> str:
        if len(self) >= _JSON_CACHE_SIZE:
            self.clear()
        flat = [*key[0], key[1]] if isinstance(key[0], tuple) else list(key)
        text = self[key] = json.dumps(flat, separators=(",", ":"))
        return text


_MEMBERS = _JsonCache()
_ENTRIES = _JsonCache()


def _json(value: int | bool | None) -> str:
    """JSON of a scalar field, as ``json.dumps`` writes it."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    return str(value) if type(value) is int else json.dumps(value)


class _NodeCache(dict[tuple[Any, Any, Any], NodeDesc]):
    """``NodeDesc(addr, int(pid), int(local_id))`` for a decoded triple, memoised: decoding
    is the other half of every store operation, and a hit also hands back a node whose
    string hash is already computed."""

    def __missing__(self, key: tuple[Any, Any, Any]) -> NodeDesc:
        if len(self) >= _JSON_CACHE_SIZE:
            self.clear()
        addr, pid, local_id = key
        node = self[key] = NodeDesc(addr, int(pid), int(local_id))
        return node


_NODES = _NodeCache()


def _decode(data: bytes) -> RendezvousState:
    """Parse the canonical JSON form."""
    nodes = _NODES
    try:
        obj = json.loads(data)
        return RendezvousState(
            round=int(obj["round"]),
            complete=bool(obj["complete"]),
            deadline=None if obj["deadline"] is None else int(obj["deadline"]),
            closed=bool(obj["closed"]),
            participants=_node_map([(nodes[a, p, i], int(r))
                                    for a, p, i, r in obj["participants"]]),
            wait_list={nodes[a, p, i] for a, p, i in obj["wait_list"]},
            redundancy_list={nodes[a, p, i] for a, p, i in obj["redundancy_list"]},
            last_heartbeats=_node_map([(nodes[a, p, i], int(t))
                                       for a, p, i, t in obj["last_heartbeats"]]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"corrupt rendezvous state: {exc}") from exc


def _node_map(pairs: list[tuple[NodeDesc, int]]) -> NodeMap:
    """The map of decoded entries: in node order and unique as :meth:`RendezvousState.encode`
    writes them (checked: anything else is sorted, a repeated node's last value wins)."""
    keys = [k for k, _ in pairs]
    if all(a < b for a, b in pairwise(keys)):
        return NodeMap.from_sorted(keys, [v for _, v in pairs])
    return NodeMap(pairs)


def _n(node: NodeDesc) -> list[Any]:
    return list(node)


def remove_participant_epilogue(state: RendezvousState, settings: RendezvousSettings) -> None:
    """After a participant left: a complete round with nobody left moves to the next round;
    a forming round that fell below min_nodes loses its last-call deadline."""
    if state.complete:
        if not state.participants:
            state.complete = False
            state.round += 1
    elif len(state.participants) < settings.min_nodes:
        state.deadline = None


def expired_nodes(state: RendezvousState, settings: RendezvousSettings,
                  now_us: int) -> list[NodeDesc]:
    """The nodes whose last heartbeat is older than interval x max_attempt by the
    OBSERVER's clock ``now_us`` (pure). With :func:`sweep`, upstream's ``_sanitize``."""
    expire = now_us - settings.keep_alive_interval_us * settings.keep_alive_max_attempt
    beats = state.last_heartbeats
    if not beats or beats.least() >= expire:  # the usual case, without a Python loop
        return []
    return [n for n, hb in beats.items() if hb < expire]


def sweep(state: RendezvousState, dead: list[NodeDesc], settings: RendezvousSettings) -> None:
    """Remove ``dead`` (from :func:`expired_nodes`) from ``state``, in place; local only."""
    removed = False
    for node in dead:
        del state.last_heartbeats[node]
        if node in state.participants:
            del state.participants[node]
            removed = True
        state.wait_list.discard(node)
        state.redundancy_list.discard(node)
    if removed:
        remove_participant_epilogue(state, settings)

