"""One training summary of the sim's fast fidelity (a ``train_steps`` event) read as the
events it stands for, without making them unless asked: their instants, kinds and places
in the expanded view (:mod:`elastic_sim.history`)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from elastic_sim.trace import (
    SUMMARISED,
    TraceEvent,
    summary_event,
    summary_fields,
    summary_instants,
)

Key = tuple[float, int, int]
"""An event's place in the expanded view: (time, recorded index, index in its summary)."""


class Stretch:
    """One ``train_steps`` summary (recorded at index ``r``) and the events it stands for:
    event ``j`` is step ``j // per``'s ``coll_enter``, ``coll_done`` or ``step`` (``j %
    per``; ``per`` is 2, no ``step`` events, for a member that traces no steps: its
    ``fields`` are null), and the last, when ``open``, the next step's ``coll_enter``."""

    __slots__ = ("ev", "fields", "first", "open", "per", "r", "seq", "steps", "times")

    def __init__(self, r: int, ev: TraceEvent) -> None:
        d = ev.data
        self.r = r
        self.ev = ev
        self.steps = int(d["steps"])
        self.open = bool(d.get("open"))
        self.seq = int(d["seq"])
        self.first = int(d["first"])
        self.fields: dict[str, Any] | None = summary_fields(ev)
        """The fields of its step events (None: it has none)."""
        self.per = 2 if self.fields is None else 3
        self.times = summary_instants(ev, self.per)

    def __len__(self) -> int:
        return len(self.times)

    @property
    def proc(self) -> str:
        """The member's process."""
        return self.ev.proc

    @property
    def group(self) -> object:
        """The process group of its collectives."""
        return self.ev.data["group"]

    @property
    def step_events(self) -> int:
        """How many ``step`` events it stands for."""
        return 0 if self.fields is None else self.steps

    def step_index(self, i: int) -> int:
        """The index of step ``i``'s ``step`` event."""
        return self.per * i + 2

    def entry_index(self, i: int) -> int:
        """The index of the ``coll_enter`` of collective ``seq + i``."""
        return self.per * i

    def kind(self, j: int) -> str:
        """The kind of event ``j``."""
        return SUMMARISED[j % self.per]

    def key(self, j: int) -> Key:
        """Event ``j``'s place in the expanded view."""
        return (self.times[j], self.r, j)

    def first_key(self) -> Key:
        """Its first event's key."""
        return (self.times[0], self.r, 0)

    def last_key(self) -> Key:
        """Its last event's key."""
        return (self.times[-1], self.r, len(self.times) - 1)

    def after(self, q: Key) -> int:
        """The index of its first event with a key above ``q`` (``len`` if none)."""
        j = bisect_left(self.times, q[0])
        while j < len(self.times) and self.key(j) <= q:
            j += 1
        return j

    def event(self, j: int) -> TraceEvent:
        """Event ``j``, as :func:`~elastic_sim.trace.expand_stretches` makes it."""
        return summary_event(self.ev, j, self.times[j], self.per, self.fields)

    def indices(self, kinds: Iterable[str]) -> range | list[int]:
        """Indices of its events of these kinds, in order."""
        wanted = [i for i, k in enumerate(SUMMARISED[:self.per]) if k in set(kinds)]
        n = len(self.times)
        if len(wanted) == self.per:
            return range(n)
        out = [self.per * i + w for i in range(self.steps) for w in wanted]
        if self.open and 0 in wanted:
            out.append(n - 1)
        return out

    def step_indices(self) -> range:
        """Indices of its ``step`` events."""
        return range(2, self.per * self.step_events, self.per)

    def step_times(self) -> Sequence[float]:
        """The instants of its ``step`` events."""
        return self.times[2:self.per * self.step_events:self.per]

    def instants(self, kind: str) -> Sequence[float]:
        """The instants of its events of a kind, in order."""
        if kind == "step":
            return self.step_times()
        return [self.times[j] for j in self.indices((kind,))]
