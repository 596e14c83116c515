"""Following a real run's trace files while it runs, for live progress.

Each process appends its events to its own file; :class:`TraceTail` reads what was added
since the last poll (complete lines only) and hands each event to a callback. The merged,
ordered trace is still written once, at the end of the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from elastic_sim.real.supervisor.workdir import RunDir
from elastic_sim.trace import TraceEvent, decode


class TraceTail:
    """New events of every trace file of a run, each passed to ``on_event`` once."""

    def __init__(self, run_dir: RunDir, on_event: Callable[[TraceEvent], None]) -> None:
        self.run_dir = run_dir
        self.on_event = on_event
        self._read: dict[Path, int] = {}

    def poll(self) -> None:
        """Pass on the events written since the last poll, in time order."""
        new: list[TraceEvent] = []
        for path in self.run_dir.traces():
            start = self._read.get(path, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(start)
                    chunk = fh.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._read[path] = start + len(complete)
            for line in complete.decode("utf-8", errors="replace").splitlines():
                try:
                    new.append(decode(line))
                except ValueError:  # a torn line: a progress display can skip it
                    continue
        for ev in sorted(new, key=lambda e: e.t):
            self.on_event(ev)
