"""How the checks read a trace: in one protocol-neutral vocabulary
(:data:`elastic_sim.trace_kinds.NEUTRAL_KINDS`), onto which each protocol maps its own
events, in one place.

A protocol's mapping is one module (its registry entry's ``vocabulary``;
``elastic_sim.protocols.<name>.vocabulary`` for the built-in ones), plain data that
imports nothing of the tool: ``EVENTS``, its recorded kind -> (the neutral kind it is read
as, a function of the recorded event's host and fields giving the neutral event's fields,
or None where that event means nothing to the checks: it stays as recorded, and no check
reads its kind).

The kinds every protocol records alike (``rdzv_done``, ``step``, ``commit``...) and the
tool's own (``run_start``, ``fault``, ``proc_exit``...) are neutral as recorded.

A :class:`~elastic_sim.history.History` reads its events once, one for one, in the
vocabulary of the protocol its ``run_start`` names (:attr:`History.neutral
<elastic_sim.history.History.neutral>`). A trace whose protocol has no vocabulary (written
by hand, or run by a variant's own entry) is read in every built-in protocol's at once:
each recorded kind belongs to one protocol (:mod:`elastic_sim.trace_kinds` lists every kind
once). An event read as a neutral one is a :class:`Fact` that keeps the recorded event:
that is what a violation shows as its witness.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from elastic_sim.trace import TraceEvent

Fields = Mapping[str, Any]
Translate = Callable[[str, Fields], dict[str, Any] | None]
"""(a recorded event's host, its fields) -> its neutral event's fields (None: it is none)."""


@dataclass(frozen=True)
class Fact(TraceEvent):
    """An event of the neutral vocabulary read from a recorded one: its time and place,
    its neutral kind and fields, and the recorded event it was read from."""

    raw: TraceEvent = field(kw_only=True)
    """The recorded event: what a witness shows."""


def recorded(ev: TraceEvent) -> TraceEvent:
    """The recorded event that ``ev`` was read from (``ev`` itself where it was read as
    recorded)."""
    return ev.raw if isinstance(ev, Fact) else ev


def amended(ev: TraceEvent, **fields: Any) -> TraceEvent:
    """``ev`` with these fields set, and so is the recorded event it shows as a witness
    (a check that judges an event as it amended it shows it so)."""
    shown = recorded(ev)
    shown = replace(shown, data={**shown.data, **fields})
    if isinstance(ev, Fact):
        return replace(ev, data={**ev.data, **fields}, raw=shown)
    return shown


@dataclass(frozen=True)
class Vocabulary:
    """How the checks read one protocol's trace (or every built-in protocol's)."""

    events: Mapping[str, tuple[str, Translate]]
    """Recorded kind -> (its neutral kind, its neutral fields)."""

    def read(self, ev: TraceEvent) -> TraceEvent:
        """``ev`` in the neutral vocabulary: a :class:`Fact` where the protocol maps its
        kind, else ``ev`` itself."""
        entry = self.events.get(ev.kind)
        if entry is None:
            return ev
        kind, translate = entry
        fields = translate(ev.host, ev.data)
        return ev if fields is None else Fact(ev.t, ev.host, ev.proc, kind, fields, raw=ev)

    def translate(self, events: Sequence[TraceEvent]) -> list[TraceEvent] | None:
        """``events`` read one for one (None: none reads differently)."""
        if not self.events:
            return None
        out = list(events)
        changed = False
        for i, ev in enumerate(events):
            if ev.kind in self.events:
                out[i] = self.read(ev)
                changed = changed or out[i] is not ev
        return out if changed else None


@functools.cache
def _load(module: str) -> Vocabulary:
    return Vocabulary(dict(importlib.import_module(module).EVENTS))


@functools.cache
def every_protocol() -> Vocabulary:
    """Every built-in protocol's vocabulary in one: each recorded kind read as the
    protocol that records it reads it."""
    from elastic_sim.registry import BUILTIN_PROTOCOLS

    events: dict[str, tuple[str, Translate]] = {}
    for info in BUILTIN_PROTOCOLS.values():
        if info.vocabulary is None:
            continue
        own = _load(info.vocabulary)
        shared = sorted(events.keys() & own.events.keys())
        if shared:
            raise ValueError(f"{info.vocabulary}: kinds another protocol maps too: {shared}")
        events.update(own.events)
    return Vocabulary(events)


@functools.cache
def vocabulary_for(protocol: str | None) -> Vocabulary:
    """The vocabulary of the protocol a trace names; every built-in protocol's for one
    that has none (no name, a variant's own entry, a registered protocol without one or
    that cannot be loaded here)."""
    from elastic_sim.registry import find_protocol

    info = None
    if protocol:
        try:
            info = find_protocol(protocol)
        except ValueError:  # registered, but its package fails to load here
            info = None
    if info is None or info.vocabulary is None:
        return every_protocol()
    return _load(info.vocabulary)
