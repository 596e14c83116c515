"""A map from node to int (participants, last heartbeats) that versions share.

Every node of a large round keeps the state version it last read, and a write changes one
or two entries of a map of N. With one dict per version, N nodes holding thousands of
versions is N² memory (10,000 agents passed 15 GB). Here a map is a sorted list of chunks
of up to ``2 * CHUNK`` entries; a copy shares every chunk and copies only those it then
changes (copy on write), so a version costs O(N / CHUNK) plus the chunks it changed.

Chunks also remember their encoded JSON and their least value, so encoding a version or
finding its oldest heartbeat redoes only the changed chunks. Iteration is in node order.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any, NamedTuple

CHUNK = 64
"""Entries per chunk when built from sorted input; a chunk splits at twice this."""

_TAGS = itertools.count(1)


class NodeDesc(NamedTuple):
    """A rendezvous participant: ordered by (addr, pid, local_id), as upstream sorts them.

    A restarted agent has a new pid, so it is a new node. (A tuple, so hashing and sorting
    thousands of them stays in C; the field order is the sort order.)"""

    addr: str
    pid: int
    local_id: int = 0

    def __repr__(self) -> str:
        return f"{self.addr}_{self.pid}_{self.local_id}"


class _Chunk:
    """Sorted keys, their values, and what was derived from them. Changed in place only by
    the map whose tag it carries; any other map copies it first."""

    __slots__ = ("joined", "keys", "least", "tag", "vals")

    def __init__(self, keys: list[NodeDesc], vals: list[int], tag: int) -> None:
        self.keys = keys
        self.vals = vals
        self.tag = tag
        self.joined: str | None = None
        """The entries' JSON, comma-separated, once someone encoded this chunk."""
        self.least: int | None = None
        """The least value, once someone asked."""


class NodeMap(MutableMapping[NodeDesc, int]):
    """``dict[NodeDesc, int]`` semantics, iterating in node order, with cheap copies."""

    __slots__ = ("_chunks", "_len", "_maxes", "_members", "_tag")

    def __init__(self, src: Mapping[NodeDesc, int] | Iterable[tuple[NodeDesc, int]] = ()
                 ) -> None:
        items = src.items() if isinstance(src, Mapping) else src
        pairs = sorted(dict(items).items())
        self._tag = next(_TAGS)
        self._fill([k for k, _ in pairs], [v for _, v in pairs])

    @classmethod
    def from_sorted(cls, keys: list[NodeDesc], vals: list[int]) -> NodeMap:
        """A map of ``keys`` (strictly increasing) to ``vals``, without sorting again."""
        out = cls.__new__(cls)
        out._tag = next(_TAGS)
        out._fill(keys, vals)
        return out

    def _fill(self, keys: list[NodeDesc], vals: list[int]) -> None:
        self._chunks = [_Chunk(keys[i:i + CHUNK], vals[i:i + CHUNK], self._tag)
                        for i in range(0, len(keys), CHUNK)]
        self._maxes = [c.keys[-1] for c in self._chunks]
        self._len = len(keys)
        self._members: tuple[NodeDesc, ...] | None = None

    def copy(self) -> NodeMap:
        """An independent map sharing every chunk until one of the two changes it."""
        out = NodeMap.__new__(NodeMap)
        out._tag = next(_TAGS)
        out._chunks = self._chunks.copy()
        out._maxes = self._maxes.copy()
        out._len = self._len
        out._members = self._members
        self._tag = next(_TAGS)  # this map no longer owns its chunks either
        return out

    # -- lookups -------------------------------------------------------------------------

    def _find(self, key: NodeDesc) -> tuple[int, int, bool]:
        """(chunk index, position in it, whether ``key`` is there)."""
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return i, 0, False
        keys = self._chunks[i].keys
        j = bisect_left(keys, key)
        return i, j, keys[j] == key

    def __getitem__(self, key: NodeDesc) -> int:
        i, j, here = self._find(key)
        if not here:
            raise KeyError(key)
        return self._chunks[i].vals[j]

    def __contains__(self, key: object) -> bool:
        try:
            return self._find(key)[2]  # type: ignore[arg-type]
        except TypeError:  # a key that does not compare with nodes
            return False

    def get(self, key: NodeDesc, default: int | None = None) -> int | None:  # type: ignore[override]
        i, j, here = self._find(key)
        return self._chunks[i].vals[j] if here else default

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[NodeDesc]:
        for c in self._chunks:
            yield from c.keys

    def values(self) -> Any:
        """The values in node order (a list)."""
        return [v for c in self._chunks for v in c.vals]

    def items(self) -> Any:
        """(node, value) in node order (a list)."""
        return [kv for c in self._chunks for kv in zip(c.keys, c.vals, strict=True)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeMap):
            return self._len == other._len and self.items() == other.items()
        if isinstance(other, Mapping):
            return self._len == len(other) and dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodeMap({dict(self.items())!r})"

    # -- changes -------------------------------------------------------------------------

    def _own(self, i: int) -> _Chunk:
        """Chunk ``i``, copied first unless this map owns it; its derived values reset."""
        c = self._chunks[i]
        if c.tag != self._tag:
            c = self._chunks[i] = _Chunk(c.keys.copy(), c.vals.copy(), self._tag)
        else:
            c.joined = c.least = None
        self._members = None
        return c

    def __setitem__(self, key: NodeDesc, value: int) -> None:
        i, j, here = self._find(key)
        if here:
            old = self._chunks[i].vals[j]
            if old == value and type(old) is type(value):
                return
            members = self._members  # the keys do not change
            self._own(i).vals[j] = value
            self._members = members
            return
        if not self._chunks:
            self._chunks.append(_Chunk([key], [value], self._tag))
            self._maxes.append(key)
            self._len = 1
            self._members = None
            return
        if i == len(self._chunks):  # beyond the last key: append to the last chunk
            i -= 1
            j = len(self._chunks[i].keys)
        c = self._own(i)
        c.keys.insert(j, key)
        c.vals.insert(j, value)
        self._maxes[i] = c.keys[-1]
        self._len += 1
        if len(c.keys) > 2 * CHUNK:
            half = len(c.keys) // 2
            right = _Chunk(c.keys[half:], c.vals[half:], self._tag)
            del c.keys[half:]
            del c.vals[half:]
            self._chunks.insert(i + 1, right)
            self._maxes[i] = c.keys[-1]
            self._maxes.insert(i + 1, right.keys[-1])

    def __delitem__(self, key: NodeDesc) -> None:
        i, j, here = self._find(key)
        if not here:
            raise KeyError(key)
        c = self._own(i)
        del c.keys[j]
        del c.vals[j]
        self._len -= 1
        if c.keys:
            self._maxes[i] = c.keys[-1]
        else:
            del self._chunks[i]
            del self._maxes[i]

    def clear(self) -> None:
        self._fill([], [])

    # -- derived values, shared by the versions that share a chunk -----------------------

    def members(self) -> tuple[NodeDesc, ...]:
        """The nodes in order, as one tuple shared by every copy made since it was built
        (in a large round every node asks for the same one)."""
        if self._members is None:
            self._members = tuple(self)
        return self._members

    def least(self) -> int:
        """``min(self.values())``; ValueError when empty."""
        out: int | None = None
        for c in self._chunks:
            if c.least is None:
                c.least = min(c.vals)
            if out is None or c.least < out:
                out = c.least
        if out is None:
            raise ValueError("least() of an empty map")
        return out

    def joined(self, entry: Mapping[Any, str]) -> str:
        """Every entry's JSON (``entry[(node, value)]``), comma-separated, in node order."""
        parts = []
        for c in self._chunks:
            if c.joined is None:
                c.joined = ",".join(map(entry.__getitem__, zip(c.keys, c.vals, strict=True)))
            parts.append(c.joined)
        return ",".join(parts)
