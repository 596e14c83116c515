"""Live progress of a run in one status line: hosts ready, faults fired, rounds formed,
steps trained. Fed the run's events as they happen (real mode reads them while it runs)."""

from __future__ import annotations

from collections.abc import Callable

from elastic_sim.trace import STRETCH, TraceEvent


class LiveStatus:
    """Turns events into a status line and passes it to ``show`` when it changes."""

    def __init__(self, hosts: int, show: Callable[[str], None]) -> None:
        self.hosts = hosts
        self.show = show
        self.ready: set[str] = set()
        self.fired: list[str] = []
        self.rounds: dict[object, int] = {}
        self.step = 0
        self._last = ""

    def __call__(self, ev: TraceEvent) -> None:
        """Take one event; show the line if it changed."""
        if ev.kind == "proc_start":
            self.ready.add(ev.host)
        elif ev.kind == "fault" and ev.get("phase") == "start":
            self.fired.append(f"{ev.get('id')} at {ev.t:.1f} s")
        elif ev.kind == "rdzv_done":
            self.rounds[ev.get("round")] = int(ev.get("world_size") or 0)
        elif ev.kind == "step":
            self.step = max(self.step, int(ev.get("step") or 0))
        elif ev.kind == STRETCH and ev.get("steps"):
            self.step = max(self.step, int(ev.get("first")) + int(ev.get("steps")) - 1)
        line = self.line()
        if line != self._last:
            self._last = line
            self.show(line)

    def line(self) -> str:
        """The status: ``hosts 4/4 ready; round 1 formed (3 members); step 30; faults
        fired: f0-crash at 2.5 s``."""
        parts = [f"hosts {len(self.ready)}/{self.hosts} ready"]
        if self.rounds:
            last = list(self.rounds)[-1]  # the round formed most recently
            parts.append(f"round {last} formed ({self.rounds[last]} members)")
        if self.step:
            parts.append(f"step {self.step}")
        if self.fired:
            parts.append(f"faults fired: {', '.join(self.fired[-3:])}"
                         + (f" (+{len(self.fired) - 3})" if len(self.fired) > 3 else ""))
        return "; ".join(parts)
