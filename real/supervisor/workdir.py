"""The run directory: where every process of a real run keeps its files.

One flat layout, shared by the launcher and every process it starts::

    specs/<host>__<name>.json   what a process was started with (its command line names it)
    pids/<host>__<name>         its pid, written by whoever started it (fault targets read it)
    addr/<host>__<name>         its message server's ``host:port`` (write-then-rename)
    trace/<host>__<name>.jsonl  its trace events, one JSON line each
    logs/<host>__<name>.log     its stdout and stderr
    started.jsonl               every process ever started: name, host, pid, parent pid
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

SUBDIRS = ("specs", "pids", "addr", "trace", "logs", "daemons")


def stem(name: str) -> str:
    """File stem of process ``host/name``: ``host__name`` (further slashes become ``_``)."""
    host, _, local = name.partition("/")
    return f"{host}__{local.replace('/', '_')}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the whole new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single ``write`` on an O_APPEND file: lines from several
    processes never interleave, and a SIGKILL loses nothing already returned from here."""
    data = (line + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Started:
    """One line of the start registry: a process that was started."""

    name: str
    host: str
    pid: int
    parent_pid: int
    start: int
    """Its start time in clock ticks since boot: with the pid, an identity that survives
    pid reuse (see :func:`elastic_sim.real.supervisor.reaper.start_time`)."""


@dataclass(frozen=True)
class RunDir:
    """The files of one real run under ``root``."""

    root: Path

    def prepare(self) -> None:
        """Create the layout, removing what an earlier run left in it."""
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in SUBDIRS:
            shutil.rmtree(self.root / sub, ignore_errors=True)
            (self.root / sub).mkdir()
        self.registry.unlink(missing_ok=True)

    @property
    def marker(self) -> str:
        """A string found in the command line of every process of this run (and no other)."""
        return str(self.root.resolve() / "specs") + os.sep

    @property
    def registry(self) -> Path:
        """The start registry (JSON lines of :class:`Started`)."""
        return self.root / "started.jsonl"

    def spec(self, name: str) -> Path:
        """Where process ``name``'s start specification lives."""
        return self.root.resolve() / "specs" / f"{stem(name)}.json"

    def pid(self, name: str) -> Path:
        """Where process ``name``'s pid lives."""
        return self.root / "pids" / stem(name)

    def addr(self, name: str) -> Path:
        """Where process ``name`` publishes its message server's address."""
        return self.root / "addr" / stem(name)

    def trace(self, name: str) -> Path:
        """Process ``name``'s trace file."""
        return self.root / "trace" / f"{stem(name)}.jsonl"

    def log(self, name: str) -> Path:
        """Process ``name``'s stdout/stderr log."""
        return self.root / "logs" / f"{stem(name)}.log"

    def daemon(self, name: str) -> Path:
        """Where process ``name`` says it stands for a daemon outside the job
        (:meth:`~elastic_sim.protocols.api.Runtime.detach`)."""
        return self.root / "daemons" / stem(name)

    def daemons(self) -> set[str]:
        """The file stems of the processes that said so."""
        folder = self.root / "daemons"
        return {p.name for p in folder.iterdir()} if folder.is_dir() else set()

    def traces(self) -> list[Path]:
        """Every trace file of the run, in name order."""
        return sorted((self.root / "trace").glob("*.jsonl"))

    def note_started(self, s: Started) -> None:
        """Record that a process was started (pid file and registry line)."""
        write_atomic(self.pid(s.name), f"{s.pid}\n")
        append_line(self.registry, json.dumps(asdict(s)))

    def started(self) -> list[Started]:
        """Every process started so far, in start order."""
        if not self.registry.exists():
            return []
        out = []
        for line in self.registry.read_text(encoding="utf-8").splitlines():
            try:
                out.append(Started(**json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a SIGKILL
        return out

    def read_pid(self, name: str) -> int | None:
        """The pid of the latest process named ``name``, if one was started."""
        try:
            return int(self.pid(name).read_text())
        except (OSError, ValueError):
            return None

    def read_addr(self, name: str) -> tuple[str, int] | None:
        """The published ``(host, port)`` of process ``name``, if any."""
        try:
            host, _, port = self.addr(name).read_text().strip().rpartition(":")
            return host, int(port)
        except (OSError, ValueError):
            return None
