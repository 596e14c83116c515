"""What a written bytes object stands for, keyed by the object's identity.

In the simulator a reader of the store is handed the very bytes object a writer stored, so
"decoding" it can be a lookup that neither parses nor even hashes a value that, in a large
round, is a megabyte. Only an identity hit is used; anything else (real mode, an evicted
entry) falls back to decoding, so the memo changes speed, never results. A memo belongs to
the processes that hand each other their objects, and lives where they share it
(:meth:`elastic_sim.protocols.api.Runtime.shared`: a sim run's processes, or one real
process), never in a module: identities mean nothing across runs.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class WriteMemo(Generic[V]):
    """Writes in flight (every one, until its compare-and-set settles: each node has at
    most one) and the latest ``keep`` winners. A bounded cache of attempts alone is not
    enough: when the store saturates, more writes are in flight than it holds, and the
    winner is evicted before anyone reads it. Entries hold their bytes, so an id is not
    reused while its entry lasts."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._in_flight: dict[int, tuple[bytes, V]] = {}
        self._won: OrderedDict[int, tuple[bytes, V]] = OrderedDict()

    def hold(self, data: bytes, meaning: V) -> None:
        """``data`` is about to be written; it stands for ``meaning``."""
        self._in_flight[id(data)] = (data, meaning)

    def settle(self, data: bytes, won: bool) -> None:
        """The write of ``data`` is over: keep it among the winners, or forget it."""
        entry = self._in_flight.pop(id(data), None)
        if entry is None or entry[0] is not data or not won:
            return
        self._won[id(data)] = entry
        if len(self._won) > self.keep:
            self._won.popitem(last=False)

    def get(self, data: bytes) -> V | None:
        """What ``data`` stands for, if it is an object this process wrote and remembers."""
        entry = self._in_flight.get(id(data)) or self._won.get(id(data))
        if entry is None or entry[0] is not data:
            return None
        return entry[1]
