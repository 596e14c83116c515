"""When faults fire besides a fixed time: on a trace event (a training step, an epoch, "host
h2 enters rendezvous round 3"), from a failure-rate model (MTBF per host), or replayed from a
failure trace file. Data and pure expansion only: the runtimes watch the events.

A failure-rate model and a replayed trace expand into plain timed faults before a run starts
(from their own seed), so both runtimes get the same schedule.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elastic_sim.faults.model import CrashHost, CrashRestart, Fault


@dataclass(frozen=True)
class EventTrigger:
    """Fire when a trace event of ``kind`` happens (on ``host``, if given) whose data has
    every field of ``match`` with that value."""

    kind: str
    host: str | None = None
    match: tuple[tuple[str, object], ...] = ()

    def matches(self, kind: str, host: str, data: object) -> bool:
        """Whether an event (kind, host, data mapping) pulls the trigger."""
        if kind != self.kind or (self.host is not None and host != self.host):
            return False
        get = getattr(data, "get", None)
        return get is not None and all(get(k) == v for k, v in self.match)

    def describe(self) -> str:
        """For reports: ``step{step=25}@h2``."""
        fields = ",".join(f"{k}={v}" for k, v in self.match)
        return self.kind + (f"{{{fields}}}" if fields else "") + (
            f"@{self.host}" if self.host else "")


@dataclass(frozen=True)
class Triggered(Fault):
    """``fault`` fires when ``when`` happens, watched from run time ``at`` on (the fault's
    own ``at`` is then ignored; heals count from the firing)."""

    fault: Fault | None = None
    when: EventTrigger | None = None

    @property
    def type(self) -> str:
        """The type of the fault that acts."""
        return self.fault.type if self.fault else "triggered"

    def hosts(self) -> tuple[str, ...]:
        return self.fault.hosts() if self.fault else ()



def unwrap(f: Fault) -> Fault:
    """The fault that acts: the inner fault of a :class:`Triggered`, else ``f`` itself."""
    return f.fault if isinstance(f, Triggered) and f.fault is not None else f


@dataclass(frozen=True)
class FailureModel:
    """Independent host failures at a rate: times between failures of each host drawn from
    an exponential (``shape`` 1) or Weibull distribution with mean ``mtbf`` seconds.

    Each failure crashes the host; with ``downtime`` the host comes back after it (a crash and
    restart), and can fail again."""

    mtbf: float
    hosts: tuple[str, ...]
    until: float
    """No failure after this run time."""
    shape: float = 1.0
    downtime: float | None = None
    seed: int = 0
    prefix: str = "mtbf"

    def expand(self) -> list[Fault]:
        """The failures, in time order (ties by host order); ids ``<prefix>-<host>-<i>``."""
        scale = self.mtbf / math.gamma(1.0 + 1.0 / self.shape)
        out: list[Fault] = []
        for host in self.hosts:
            rng = random.Random(f"{self.seed}/{self.prefix}/{host}")
            t, i = 0.0, 0
            while True:
                t += rng.weibullvariate(scale, self.shape)
                if t > self.until:
                    break
                at = round(t, 3)
                fid = f"{self.prefix}-{host}-{i}"
                if self.downtime is None:
                    out.append(CrashHost(fid, at, host))
                    break  # a crashed host without restart stays down
                out.append(CrashRestart(fid, at, host, self.downtime))
                t += self.downtime
                i += 1
        order = {h: n for n, h in enumerate(self.hosts)}
        return sorted(out, key=lambda f: (f.at, order[f.hosts()[0]]))


class TraceFileError(ValueError):
    """A failure trace file that cannot be replayed: ``where`` names the row and column."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


ReplayKind = Literal["crash", "crash_restart"]


def parse_failure_trace(text: str, fmt: Literal["csv", "json"], hosts: Sequence[str],
                        downtime: float | None = None, prefix: str = "replay") -> list[Fault]:
    """Failures from a trace: rows (CSV with a header) or a JSON list of objects with ``time``
    and ``host``, and optionally ``downtime`` (the host comes back after it)."""
    rows: list[dict[str, object]]
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceFileError(f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise TraceFileError("top level", "expected a list of {time, host} objects")
        rows = data
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
    out: list[Fault] = []
    for i, row in enumerate(rows):
        where = f"row {i + 1}" if fmt == "json" else f"line {i + 2}"
        try:
            at = float(str(row.get("time", "")))
        except ValueError:
            raise TraceFileError(f"{where}.time", f"expected a number of seconds, got "
                                 f"{row.get('time')!r}") from None
        if not at >= 0 or math.isinf(at):
            raise TraceFileError(f"{where}.time", f"expected a time >= 0, got {at}")
        host = str(row.get("host", "")).strip()
        if host not in hosts:
            raise TraceFileError(f"{where}.host", f"unknown host {host!r}; expected one of: "
                                 + ", ".join(list(hosts)[:8]))
        down = row.get("downtime", downtime)
        fid = f"{prefix}-{i}"
        if down in (None, ""):
            out.append(CrashHost(fid, at, host))
        else:
            try:
                d = float(str(down))
            except ValueError:
                raise TraceFileError(f"{where}.downtime", f"expected seconds, got "
                                     f"{down!r}") from None
            out.append(CrashRestart(fid, at, host, d))
    return sorted(out, key=lambda f: f.at)
