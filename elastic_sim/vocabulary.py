"""How the checks read a trace: in one protocol-neutral vocabulary
(:data:`elastic_sim.trace_kinds.NEUTRAL_KINDS`), onto which each protocol maps its own
events, in one place.

A protocol's mapping is one module (its registry entry's ``vocabulary``;
``elastic_sim.protocols.<name>.vocabulary`` for the built-in ones), plain data that
imports nothing of the tool:

- ``EVENTS``: its recorded kind -> (the neutral kind it is read as, a function of the
  recorded event's host and fields giving the neutral event's fields, or None where that
  event means nothing to the checks: it stays as recorded, and no check reads its kind);
- ``KNOB`` and ``limits(knobs)`` (optional): a knob that only this protocol's knobs have,
  and what its knobs promise, as the fields of :class:`elastic_sim.checks.facts.Limits`.

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
Claim = tuple[str, str, Callable[[Fields], Mapping[str, Any]]]
"""(a protocol, the knob that tells its knobs apart, what its knobs promise)."""


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
    claims: tuple[Claim, ...] = ()
    """The protocols whose knobs it reads, in the order they are tried."""

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

    def claim(self, knobs: Fields) -> Claim | None:
        """The first protocol whose knobs these are."""
        return next((c for c in self.claims if c[1] in knobs), None)

    def limits(self, knobs: Fields) -> Mapping[str, Any] | None:
        """What the knobs promise (the fields of ``Limits``), or None for knobs of no
        protocol it knows."""
        got = self.claim(knobs)
        return None if got is None else got[2](knobs)


@functools.cache
def _load(protocol: str, module: str) -> Vocabulary:
    mod = importlib.import_module(module)
    knob, limits = getattr(mod, "KNOB", None), getattr(mod, "limits", None)
    claims: tuple[Claim, ...] = ((protocol, knob, limits),) if knob and limits else ()
    return Vocabulary(dict(mod.EVENTS), claims)


@functools.cache
def every_protocol() -> Vocabulary:
    """Every built-in protocol's vocabulary in one (their knobs tried in registry order):
    each recorded kind read as the protocol that records it reads it."""
    from elastic_sim.registry import BUILTIN_PROTOCOLS

    events: dict[str, tuple[str, Translate]] = {}
    claims: tuple[Claim, ...] = ()
    for name, info in BUILTIN_PROTOCOLS.items():
        if info.vocabulary is None:
            continue
        own = _load(name, info.vocabulary)
        shared = sorted(events.keys() & own.events.keys())
        if shared:
            raise ValueError(f"{info.vocabulary}: kinds another protocol maps too: {shared}")
        events.update(own.events)
        claims += own.claims
    return Vocabulary(events, claims)


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
    return _load(protocol, info.vocabulary)
