"""The trace format, defined once: JSON Lines, one :class:`TraceEvent` per line.

Both runtimes write it, every checker, metric and report reads it. Faults are events in
the same history as protocol operations (Jepsen's rule: the history is the single source
of truth). Lines are encoded deterministically (fixed key order, times rounded to the
microsecond) so that the same (scenario, seed) gives a byte-identical file.

Every event kind and its ``data`` fields are listed once, in
:mod:`elastic_sim.trace_kinds`; ``python -m elastic_sim.tracedoc`` writes them as the table
docs/trace-events.md, with the checks that read each kind.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

TIME_DECIMALS = 6


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened: when (run time, seconds), where (host, process), what."""

    t: float
    host: str
    proc: str
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of ``data``."""
        return self.data.get(key, default)


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=False, allow_nan=False)
"""Built once: ``json.dumps`` with non-default options builds a new encoder per call."""
_MIDDLES: dict[tuple[str, str, str], str] = {}
"""The encoded ``host``, ``proc`` and ``kind`` members of a line, per (host, proc, kind)."""
_MIDDLES_MAX = 1 << 16
_INF = float("inf")


def encode(ev: TraceEvent) -> str:
    """One line of JSON, byte-identical for equal events: the object
    ``{"t", "host", "proc", "kind", "data"}`` in that order, no spaces, no NaN. Built from
    parts (the members between ``t`` and ``data`` repeat and are kept encoded) with what
    :class:`json.JSONEncoder` writes for each part."""
    key = (ev.host, ev.proc, ev.kind)
    middle = _MIDDLES.get(key)
    if middle is None:
        if len(_MIDDLES) >= _MIDDLES_MAX:
            _MIDDLES.clear()
        enc = _ENCODER.encode
        middle = _MIDDLES[key] = (f',"host":{enc(ev.host)},"proc":{enc(ev.proc)},'
                                  f'"kind":{enc(ev.kind)},"data":')
    t = round(ev.t, TIME_DECIMALS)
    stamp = float.__repr__(t) if type(t) is float and -_INF < t < _INF else _ENCODER.encode(t)
    data = ev.data if type(ev.data) is dict else dict(ev.data)
    return f'{{"t":{stamp}{middle}{_ENCODER.encode(data)}}}'



class RecordError(ValueError):
    """A file of a run (its trace, its summary) that cannot be read back: the file, where
    in it (``line N`` or a field path) and what is wrong."""

    def __init__(self, file: str, where: str, message: str) -> None:
        super().__init__(f"{file}: {where}: {message}")
        self.file = file
        self.where = where
        self.message = message


_FIELDS = (("t", (int, float), "a number"), ("host", str, "a string"),
           ("proc", str, "a string"), ("kind", str, "a string"))


def decode(line: str) -> TraceEvent:
    """Parse one line written by :func:`encode`; ValueError saying what is wrong."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    for key, types, what in _FIELDS:
        value = obj.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            raise ValueError(f"field {key!r}: expected {what}, got {value!r:.60}")
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError(f"field 'data': expected an object, got {type(data).__name__}")
    if not math.isfinite(obj["t"]):
        raise ValueError(f"field 't': expected a finite number, got {obj['t']}")
    return TraceEvent(t=float(obj["t"]), host=obj["host"], proc=obj["proc"], kind=obj["kind"],
                      data=data)


class TraceWriter:
    """Writes events as JSON Lines and keeps the sha256 of what it wrote."""

    def __init__(self, fh: TextIO) -> None:
        self._fh = fh
        self._sha = hashlib.sha256()
        self.count = 0

    def write(self, ev: TraceEvent) -> None:
        """Append one event."""
        line = encode(ev) + "\n"
        self._sha.update(line.encode())
        self._fh.write(line)
        self.count += 1

    @property
    def sha256(self) -> str:
        """Digest of every line written so far."""
        return self._sha.hexdigest()


def write_trace(path: Path, events: Iterable[TraceEvent]) -> str:
    """Write a whole trace file; return its sha256."""
    with path.open("w", encoding="utf-8") as fh:
        w = TraceWriter(fh)
        for ev in events:
            w.write(ev)
        return w.sha256


def read_trace(path: Path) -> list[TraceEvent]:
    """Read a trace file, its ``train_steps`` summaries expanded (:func:`expand_stretches`)."""
    return list(expand_stretches(list(iter_trace(path))))


STRETCH = "train_steps"
"""The summary of a lockstep stretch of training steps of one member (the sim's fast
fidelity, :mod:`sim.stretch`)."""


def expand_stretches(events: Sequence[TraceEvent]) -> Sequence[TraceEvent]:
    """``events`` with each ``train_steps`` summary replaced by the events the fine-grained
    run traces for those steps (per step: ``coll_enter`` at the end of its compute,
    ``coll_done`` and ``step`` when its allreduce ends; then, if ``open``, the next step's
    ``coll_enter``), in time order; ``events`` itself when it holds no summary.

    Step i's instants are the fine run's own float sums: ``e = c + sleep``,
    ``c = e + cost`` from ``c = start``."""
    if not any(ev.kind == STRETCH for ev in events):
        return events
    out: list[TraceEvent] = []
    for ev in events:
        if ev.kind != STRETCH:
            out.append(ev)
            continue
        d = ev.data
        group, op, nbytes, seq = d["group"], d["op"], d["nbytes"], int(d["seq"])
        sleep, cost, first = float(d["sleep"]), float(d["cost"]), int(d["first"])
        raw = d.get("fields", {})
        fields = None if raw is None else dict(raw)  # None: the member traces no steps
        host, proc = ev.host, ev.proc
        t = float(d["start"])
        for i in range(int(d["steps"])):
            t = t + sleep
            out.append(TraceEvent(t, host, proc, "coll_enter",
                                  {"group": group, "seq": seq + i, "op": op, "nbytes": nbytes}))
            t = t + cost
            out.append(TraceEvent(t, host, proc, "coll_done",
                                  {"group": group, "seq": seq + i, "op": op}))
            if fields is not None:
                out.append(TraceEvent(t, host, proc, "step", {**fields, "step": first + i}))
        if d.get("open"):
            out.append(TraceEvent(t + sleep, host, proc, "coll_enter",
                                  {"group": group, "seq": seq + int(d["steps"]), "op": op,
                                   "nbytes": nbytes}))
    out.sort(key=lambda e: e.t)
    return out


def iter_trace(path: Path) -> Iterator[TraceEvent]:
    """Stream a trace file's events; :class:`RecordError` naming the first bad line."""
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
                event = decode(line) if line.strip() else None
            except ValueError as exc:  # UnicodeDecodeError included
                raise RecordError(str(path), f"line {n}", str(exc)) from None
            if event is not None:
                yield event


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (how a run's trace is identified)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
