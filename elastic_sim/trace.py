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
from functools import lru_cache
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

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, str, str]]:
        """Pickled as its three parts (raised in a worker process, it reaches the parent
        whole)."""
        return (type(self), (self.file, self.where, self.message))


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
fidelity, :mod:`elastic_sim.sim.stretch`)."""


SUMMARISED = ("coll_enter", "coll_done", "step")
"""The kinds a ``train_steps`` summary stands for, in the order of a step's events."""


@lru_cache(maxsize=4096)
def _instants(start: float, sleep: float, cost: float, steps: int, open_: bool, per: int
              ) -> tuple[float, ...]:
    out: list[float] = []
    t = start
    for _ in range(steps):
        t = t + sleep
        out.append(t)
        t = t + cost
        out.append(t)
        if per == 3:
            out.append(t)
    if open_:
        out.append(t + sleep)
    return tuple(out)


def summary_fields(ev: TraceEvent) -> dict[str, Any] | None:
    """A summary's ``step`` event fields (None: the member traces no step events)."""
    raw = ev.data.get("fields", {})
    return None if raw is None else dict(raw)


def summary_instants(ev: TraceEvent, per: int) -> tuple[float, ...]:
    """The instants of a summary's events, ``per`` (3, or 2 without ``step`` events) per
    step, then the open entry: step i's entry ``e = c + sleep`` and end ``c = e + cost``
    from ``c = start``, the fine run's own float sums (shared by a stretch's members)."""
    d = ev.data
    return _instants(float(d["start"]), float(d["sleep"]), float(d["cost"]), int(d["steps"]),
                     bool(d.get("open")), per)


def summary_event(ev: TraceEvent, j: int, t: float, per: int,
                  fields: Mapping[str, Any] | None) -> TraceEvent:
    """Event ``j`` (at ``t``) of summary ``ev``: step ``j // per``'s ``coll_enter``,
    ``coll_done`` or ``step``; past the last step, the open entry of the next."""
    d = ev.data
    i, which = divmod(j, per)
    kind = SUMMARISED[which]
    data: dict[str, Any]
    if kind == "step":
        data = {**(fields or {}), "step": int(d["first"]) + i}
    elif kind == "coll_done":
        data = {"group": d["group"], "seq": int(d["seq"]) + i, "op": d["op"]}
    else:
        data = {"group": d["group"], "seq": int(d["seq"]) + i, "op": d["op"],
                "nbytes": d["nbytes"]}
    return TraceEvent(t, ev.host, ev.proc, kind, data)


def expand_stretches(events: Sequence[TraceEvent]) -> Sequence[TraceEvent]:
    """``events`` with each ``train_steps`` summary replaced by the events the fine-grained
    run traces for those steps (per step: ``coll_enter`` at the end of its compute,
    ``coll_done`` and ``step`` when its allreduce ends; then, if ``open``, the next step's
    ``coll_enter``), in time order; ``events`` itself when it holds no summary."""
    if not any(ev.kind == STRETCH for ev in events):
        return events
    out: list[TraceEvent] = []
    for ev in events:
        if ev.kind != STRETCH:
            out.append(ev)
            continue
        fields = summary_fields(ev)
        per = 2 if fields is None else 3
        times = summary_instants(ev, per)
        out.extend(summary_event(ev, j, t, per, fields) for j, t in enumerate(times))
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
