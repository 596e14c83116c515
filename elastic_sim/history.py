"""A run's trace as its readers see it: the events in order, with the ``train_steps``
summaries of the sim's fast fidelity read as the steps they stand for, without making
those steps one by one unless a reader asks for them.

The *expanded view* is the trace every reader is defined over: each summary replaced by
the ``coll_enter`` / ``coll_done`` / ``step`` events of its steps, in time order
(:func:`elastic_sim.trace.expand_stretches`). A :class:`History` is that view as a
sequence (built lazily, at most once), plus what lets a reader avoid it:

- :attr:`History.plain`: every event that is not a summary, in the expanded view's order;
  exact for a reader of other kinds than the summaries' (most checks);
- :meth:`History.of`: the events of some kinds, in order (indexed once per kind; a
  summarised kind makes only that kind's events);
- :attr:`History.stretches`: the summaries, each a :class:`~elastic_sim.summaries.Stretch`
  that knows its events' instants and makes any one of them on demand;
  :meth:`History.next_after` finds the first event of the expanded view after a point
  without making the others.

Every event has a *key* ``(t, r, j)``, its place in the expanded view: time, the index
in the recorded trace of the event (or of the summary it came from) and its index within
that summary's events (0 for a recorded event). The expanded view is its events sorted by
key (the stable sort by time of :func:`~elastic_sim.trace.expand_stretches`).

The checks read a history in their protocol-neutral vocabulary (:attr:`History.neutral`,
:mod:`elastic_sim.vocabulary`): a history of the same shape, each event read as its
protocol's vocabulary says, at its place. What they need of the summaries they ask the
history (:meth:`History.entries`, :meth:`History.occurs`, :meth:`History.made_first_from`,
:meth:`History.relabelled`), never the summaries themselves.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar, overload

from elastic_sim.summaries import Key as Key
from elastic_sim.summaries import Stretch as Stretch
from elastic_sim.trace import STRETCH, SUMMARISED, TraceEvent, expand_stretches
from elastic_sim.vocabulary import vocabulary_for

_INF = math.inf
T = TypeVar("T")


class Entries(NamedTuple):
    """One process's entries into consecutive collectives of one group, all of one
    operation and size, that a training summary stands for: its steps', and the next
    one's when it was entered."""

    key: Key
    """The first one's place in the expanded view."""
    proc: str
    group: Any
    seq: int
    """The first one's sequence number."""
    end: int
    """One past the last one's."""
    op: Any
    nbytes: Any


class History(Sequence[TraceEvent]):
    """A trace (summaries included), read as its expanded view; see the module."""

    def __init__(self, events: Iterable[TraceEvent], neutral: bool = False) -> None:
        """``neutral``: the events are already in the checks' vocabulary (the history is
        its own :attr:`neutral` view)."""
        self.raw: list[TraceEvent] = list(events)
        self.stretches: list[Stretch] = []
        plain: list[tuple[Key, TraceEvent]] = []
        for r, ev in enumerate(self.raw):
            if str.__eq__(ev.kind, STRETCH):  # the history's reading, not its reader's
                self.stretches.append(Stretch(r, ev))
            else:
                plain.append(((ev.t, r, 0), ev))
        in_order = all(a[0] <= b[0] for a, b in itertools.pairwise(plain))
        self.ordered = bool(self.stretches) or in_order
        """Whether keys give the expanded view's order (a trace with summaries is sorted by
        time; one without is its recorded order, which may go back in time)."""
        if not in_order and self.stretches:
            plain.sort(key=lambda p: p[0])
        self.keys: list[Key] = [k for k, _ in plain]
        """The keys of :attr:`plain`."""
        self.plain: list[TraceEvent] = [ev for _, ev in plain]
        """Every recorded event but the summaries, in the expanded view's order."""
        self._expanded: list[TraceEvent] | None = None if self.stretches else self.raw
        self._by_kind: dict[str, list[int]] | None = None
        self._of: dict[tuple[str, ...], list[TraceEvent]] = {}
        self._spans: tuple[list[Stretch], list[Key], list[Key]] | None = None
        self._by_proc: dict[str, list[Key]] | None = None
        self._entries: dict[tuple[str, str], list[Stretch]] | None = None
        self._blocks: list[tuple[Key, Stretch | TraceEvent]] | None = None
        self._times: dict[str, list[float]] = {}
        self._neutral: History | None = self if neutral else None

    # -- the checks' reading ------------------------------------------------------------

    @property
    def neutral(self) -> History:
        """This history as the checks read it: each event in the protocol-neutral
        vocabulary of the protocol its ``run_start`` names (:mod:`elastic_sim.vocabulary`),
        one for one, at the same place (the same keys, the same summaries). Read once;
        itself when no event reads differently."""
        if self._neutral is None:
            start = next((ev for ev in self.plain if ev.kind == "run_start"), None)
            name = start.get("protocol") if start is not None else None
            read = vocabulary_for(str(name) if name else None).translate(self.raw)
            self._neutral = self if read is None else self._read_as(read)
        return self._neutral

    def _read_as(self, raw: list[TraceEvent]) -> History:
        """This history with ``raw`` (its events, one for one, read otherwise) recorded."""
        view = copy.copy(self)
        view.raw = raw
        view.plain = [raw[r] for _, r, _ in self.keys]
        view._expanded = None if self.stretches else raw
        view._by_kind, view._of, view._blocks, view._times = None, {}, None, {}
        view._neutral = view
        return view

    # -- the expanded view --------------------------------------------------------------

    @property
    def events(self) -> list[TraceEvent]:
        """The expanded view (made on first use, once)."""
        if self._expanded is None:
            self._expanded = list(expand_stretches(self.raw))
        return self._expanded

    @overload
    def __getitem__(self, i: int) -> TraceEvent: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[TraceEvent]: ...
    def __getitem__(self, i: int | slice) -> TraceEvent | Sequence[TraceEvent]:
        return self.events[i]

    def __len__(self) -> int:
        return len(self.events)

    @property
    def size(self) -> int:
        """How many events the expanded view holds (without making it)."""
        return len(self.plain) + sum(len(st) for st in self.stretches)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __reversed__(self) -> Iterator[TraceEvent]:
        return reversed(self.events)

    def __eq__(self, other: object) -> bool:
        """Equal to a sequence of the same events (the expanded view), as a list is."""
        if isinstance(other, History):
            return self.events == other.events
        return isinstance(other, Sequence) and not isinstance(other, str) and \
            self.events == list(other)

    __hash__ = None  # type: ignore[assignment]

    # -- by kind ------------------------------------------------------------------------

    def recorded(self, *kinds: str) -> list[TraceEvent]:
        """The recorded events of these kinds (none a summary stands for), in order."""
        return self.of(*kinds) if not self.stretches or not set(kinds) & set(SUMMARISED) \
            else [ev for ev in self.plain if ev.kind in kinds]

    def of(self, *kinds: str) -> list[TraceEvent]:
        """The events of these kinds, in the expanded view's order (summarised kinds made
        from the summaries, only those asked for)."""
        got = self._of.get(kinds)
        if got is not None:
            return got
        idx = self._indices(kinds)
        made = [k for k in SUMMARISED if k in kinds]
        if made and self.stretches:
            keyed = [(self.keys[i], self.plain[i]) for i in idx]
            for st in self.stretches:
                keyed.extend((st.key(j), st.event(j)) for j in st.indices(made))
            keyed.sort(key=lambda p: p[0])
            got = [ev for _, ev in keyed]
        else:
            got = [self.plain[i] for i in idx]
        self._of[kinds] = got
        return got

    def _indices(self, kinds: tuple[str, ...]) -> list[int]:
        """The indices in :attr:`plain` of its events of these kinds, in order."""
        if self.raw:  # ask the trace: a kind that records what it is compared with (checks.reads)
            for kind in kinds:
                _ = self.raw[0].kind == kind
        if self._by_kind is None:
            self._by_kind = {}
            for i, ev in enumerate(self.plain):
                self._by_kind.setdefault(str(ev.kind), []).append(i)
        return sorted(i for k in dict.fromkeys(kinds) for i in self._by_kind.get(k, ()))

    def step_blocks(self) -> list[tuple[Key, Stretch | TraceEvent]]:
        """The steps of the stretches, in key order: each stretch as one block at its first
        step, for a reader of one process's steps (no other event of the process comes
        between them), or, for a stretch that another event of its process interrupts,
        each step on its own. Found once."""
        if self._blocks is None:
            out: list[tuple[Key, Stretch | TraceEvent]] = []
            for st in self.stretches:
                if not st.step_events:
                    continue
                if self.interrupted(st, 2):
                    out.extend((st.key(j), st.event(j)) for j in st.step_indices())
                else:
                    out.append((st.key(2), st))
            out.sort(key=lambda p: p[0])
            self._blocks = out
        return self._blocks

    def step_marks(self) -> list[tuple[Key, TraceEvent]]:
        """:meth:`step_blocks` with each block as its first ``step``: for a reader to whom
        a process's further steps add nothing until another event of that process."""
        return [(k, b.event(2) if isinstance(b, Stretch) else b) for k, b in self.step_blocks()]

    def entry_before(self, proc: str, group: str, seq: int, before: Key) -> Key | None:
        """The key of the latest ``coll_enter`` of ``proc`` into ``group``'s collective
        ``seq`` that a stretch made before ``before`` (None: none did)."""
        if self._entries is None:
            self._entries = {}
            for st in self.stretches:
                self._entries.setdefault((st.proc, str(st.group)), []).append(st)
        best: Key | None = None
        for st in self._entries.get((proc, group), ()):
            i = seq - st.seq
            if 0 <= i <= st.steps and st.entry_index(i) < len(st):
                key = st.key(st.entry_index(i))
                if key < before and (best is None or key > best):
                    best = key
        return best

    def keyed(self, *kinds: str) -> list[tuple[Key, TraceEvent]]:
        """The recorded events of these kinds (none a summary stands for) with their keys,
        in the order of :attr:`plain`."""
        return [(self.keys[i], self.plain[i]) for i in self._indices(kinds)]

    def entries(self, whole: bool = False) -> list[Entries] | None:
        """The ``coll_enter`` events that training summaries stand for, each summary's as
        one :class:`Entries`, in summary order (the recorded ones: :meth:`recorded`). With
        ``whole``, None when a recorded event of its process lies among a summary's (a
        hand-made trace: to be read one by one)."""
        out: list[Entries] = []
        for st in self.stretches:
            if len(st):
                if whole and self.interrupted(st):
                    return None
                d = st.ev.data
                out.append(Entries(st.first_key(), st.proc, st.group, st.seq,
                                   st.seq + st.steps + st.open, d["op"], d["nbytes"]))
        return out

    def occurs(self, kind: str, a: float, b: float) -> bool:
        """Whether an event of this kind lies at an instant in ``[a, b]`` (those that
        summaries stand for found without making them)."""
        times = self._times.get(kind)
        if times is None:
            times = self._times[kind] = sorted(ev.t for ev in self.recorded(kind))
        i = bisect_left(times, a)
        if i < len(times) and times[i] <= b:
            return True
        if kind not in SUMMARISED:
            return False
        for st in self.spanning((a, -1, -1), (b, len(self.raw), 0)):
            inst = st.instants(kind)
            i = bisect_left(inst, a)
            if i < len(inst) and inst[i] <= b:
                return True
        return False

    def made_first_from(self, t: float) -> list[tuple[Key, TraceEvent]]:
        """The first event of the expanded view at ``t`` or later, with its key, when a
        summary stands for it; none when it is recorded (or there is none): what a reader
        of the recorded events (:attr:`plain`) puts in its place where that event
        matters."""
        if not self.stretches:
            return []
        nxt = self.next_after((t, -1, -1))
        i = bisect_left(self.keys, (t, -1, -1))
        if nxt is None or (i < len(self.keys) and nxt[0] == self.keys[i]):
            return []
        return [nxt]

    def relabelled(self, marks: Callable[[TraceEvent], bool],
                   relabel: Callable[[TraceEvent, int], TraceEvent]) -> History:
        """This history with each event ``ev`` as ``relabel(ev, n)``: ``n`` counts the
        recorded events for which ``marks`` holds, up to ``ev`` and itself included, in
        the expanded view's order. ``relabel`` changes fields only; a summary is
        relabelled as its events would be (its own fields, and its steps' as an event of
        no kind), once every summary is read step by step if one spans a mark."""
        at = [k for k, ev in zip(self.keys, self.plain, strict=True) if marks(ev)]
        hist = self
        if any(bisect_left(at, st.first_key()) != bisect_left(at, st.last_key())
               for st in self.stretches):
            hist = History(expand_stretches(self.raw))
        n, out = 0, list(hist.raw)
        for key, ev in zip(hist.keys, hist.plain, strict=True):
            n += marks(ev)
            out[key[1]] = relabel(ev, n)
        for st in hist.stretches:
            before = bisect_left(at, st.first_key())
            steps = dict(st.ev.data.get("fields") or {})
            stepped = relabel(TraceEvent(0.0, "", "", "", steps), before).data
            ev = relabel(st.ev, before)
            out[st.r] = replace(ev, data={**ev.data, "fields": stepped}) \
                if stepped != steps else ev
        return History(out)

    def first(self, kind: str) -> TraceEvent | None:
        """The first event of a kind."""
        evs = self.of(kind)
        return evs[0] if evs else None

    def last(self, kind: str) -> TraceEvent | None:
        """The last event of a kind."""
        evs = self.of(kind)
        return evs[-1] if evs else None

    # -- places -------------------------------------------------------------------------

    def _span_index(self) -> tuple[list[Stretch], list[Key], list[Key]]:
        """Stretches by first key, their first keys, and the running maximum of their last
        keys (to find the stretches that span a point)."""
        if self._spans is None:
            sts = sorted((st for st in self.stretches if len(st)), key=Stretch.first_key)
            reach: list[Key] = []
            top: Key = (-_INF, -1, -1)
            for st in sts:
                top = max(top, st.last_key())
                reach.append(top)
            self._spans = (sts, [st.first_key() for st in sts], reach)
        return self._spans

    def spanning(self, lo: Key, hi: Key) -> Iterator[Stretch]:
        """The stretches with an event whose key lies in ``(lo, hi)`` (a superset: those
        whose span meets it)."""
        sts, starts, reach = self._span_index()
        end = bisect_left(starts, hi)
        i = end - 1
        while i >= 0 and reach[i] > lo:
            if sts[i].last_key() > lo:
                yield sts[i]
            i -= 1

    def next_after(self, q: Key) -> tuple[Key, TraceEvent] | None:
        """The first event of the expanded view with a key above ``q``, and its key."""
        if not self.ordered:
            for r, ev in enumerate(self.raw):
                if (ev.t, r, 0) > q:
                    return (ev.t, r, 0), ev
            return None
        best: tuple[Key, TraceEvent | Stretch, int] | None = None
        i = bisect_right(self.keys, q)
        if i < len(self.keys):
            best = (self.keys[i], self.plain[i], 0)
        sts, starts, _ = self._span_index()
        nxt = bisect_right(starts, q)
        if nxt < len(sts) and (best is None or starts[nxt] < best[0]):
            best = (starts[nxt], sts[nxt], 0)
        for st in self.spanning(q, best[0] if best else (_INF, 0, 0)):
            j = st.after(q)
            if j < len(st) and (best is None or st.key(j) < best[0]):
                best = (st.key(j), st, j)
        if best is None:
            return None
        key, src, j = best
        return key, (src.event(j) if isinstance(src, Stretch) else src)

    def first_from(self, t: float) -> TraceEvent | None:
        """The first event of the expanded view at ``t`` or later."""
        got = self.next_after((t, -1, -1))
        return got[1] if got else None

    def proc_keys(self, proc: str) -> list[Key]:
        """The keys of a process's recorded events (summaries aside), in order."""
        if self._by_proc is None:
            self._by_proc = {}
            for key, ev in zip(self.keys, self.plain, strict=True):
                self._by_proc.setdefault(ev.proc, []).append(key)
        return self._by_proc.get(proc, [])

    def interrupted(self, st: Stretch, lo: int = 0) -> bool:
        """Whether a recorded event of the stretch's own process lies among its events
        (from event ``lo`` on): the sim never records one (the process is inside the
        stretch), a hand-made trace may."""
        keys = self.proc_keys(st.proc)
        i = bisect_right(keys, st.key(lo))
        return i < len(keys) and keys[i] < st.last_key()


def history(events: Sequence[TraceEvent]) -> History:
    """``events`` as a :class:`History` (itself when it is one)."""
    return events if isinstance(events, History) else History(events)


def neutral(events: Sequence[TraceEvent]) -> History:
    """``events`` as the checks read them: the :attr:`History.neutral` view of their
    history."""
    return history(events).neutral


def merged(hist: History, extra: Iterable[tuple[Key, T]]) -> Iterator[TraceEvent | T]:
    """:attr:`History.plain` with ``extra`` (keyed items in key order) merged in."""
    plain: Iterable[tuple[Key, TraceEvent | T]] = zip(hist.keys, hist.plain, strict=True)
    for _, item in heapq.merge(plain, extra, key=lambda p: p[0]):
        yield item
