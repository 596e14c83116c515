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
from collections.abc import Iterable, Iterator, Mapping
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


def encode(ev: TraceEvent) -> str:
    """One line of JSON, byte-identical for equal events."""
    return json.dumps(
        {
            "t": round(ev.t, TIME_DECIMALS),
            "host": ev.host,
            "proc": ev.proc,
            "kind": ev.kind,
            "data": dict(ev.data),
        },
        separators=(",", ":"),
        sort_keys=False,
        allow_nan=False,
    )


def decode(line: str) -> TraceEvent:
    """Parse one line written by :func:`encode`."""
    obj = json.loads(line)
    return TraceEvent(
        t=float(obj["t"]),
        host=str(obj["host"]),
        proc=str(obj["proc"]),
        kind=str(obj["kind"]),
        data=obj.get("data") or {},
    )


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
    """Read a trace file."""
    return list(iter_trace(path))


def iter_trace(path: Path) -> Iterator[TraceEvent]:
    """Stream a trace file's events."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield decode(line)


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (how a run's trace is identified)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
