"""Per-process trace files of a real run, and their merge into one history.

Every process appends its own events, one JSON line per ``write``, so a SIGKILL loses
nothing already recorded. The launcher merges the files by run time when the run ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from elastic_sim.real.supervisor.workdir import append_line
from elastic_sim.trace import TraceEvent, decode, encode


class TraceFile:
    """The trace file of one process (or of the launcher)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, ev: TraceEvent) -> None:
        """Append one event, durably enough to survive a SIGKILL right after."""
        append_line(self.path, encode(ev))

    def event(self, t: float, host: str, proc: str, kind: str, data: Mapping[str, Any]) -> None:
        """Append the event made of these fields."""
        self.write(TraceEvent(t=t, host=host, proc=proc, kind=kind, data=dict(data)))


def merge(paths: Iterable[Path]) -> list[TraceEvent]:
    """Every event of ``paths`` sorted by run time, ties broken by host, process, file and
    line (stable across runs). A line a kill cut short is skipped."""
    keyed: list[tuple[tuple[float, str, str, str, int], TraceEvent]] = []
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh):
                try:
                    ev = decode(line)
                except (ValueError, KeyError, TypeError):
                    continue
                keyed.append(((ev.t, ev.host, ev.proc, path.name, lineno), ev))
    keyed.sort(key=lambda kv: kv[0])
    return [ev for _, ev in keyed]
