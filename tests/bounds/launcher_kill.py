"""Killing a real run's launcher with SIGKILL at a chosen phase, and counting what it left
behind: processes, network namespaces, listening sockets, temporary files, wardens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("startup", "midrun", "recovery", "partition")


@dataclass
class Leftovers:
    """What a killed run left, counted after the grace period."""

    processes: list[str]
    namespaces: list[str]
    listening: list[int]
    temp_files: list[str]
    wardens: list[int]

    @property
    def total(self) -> int:
        """Everything left, summed."""
        return (len(self.processes) + len(self.namespaces) + len(self.listening)
                + len(self.temp_files) + len(self.wardens))


def _real(out: Path) -> Path:
    """The run's real-mode directory: a run works in a staging directory beside ``out``
    (``OUT.part-PID``) until it is complete, then it becomes ``out``."""
    staged = sorted(out.parent.glob(f"{out.name}.part-*"))
    return (staged[-1] if staged else out) / "real"


def _traces_contain(out: Path, needle: str, files: str = "*.jsonl") -> bool:
    for path in (_real(out) / "trace").glob(files):
        try:
            if needle in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def _started(out: Path) -> int:
    try:
        return len((_real(out) / "started.jsonl").read_text().splitlines())
    except OSError:
        return 0


def _wait(cond: object, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def start(scenario: Path, out: Path, tmp: Path) -> subprocess.Popen[bytes]:
    """Start ``elastic-sim run --mode real`` with a private TMPDIR."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen(
        [sys.executable, "-m", "elastic_sim.cli", "run", str(scenario), "--mode", "real",
         "--out", str(out), "--no-report", "-q"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def reach(phase: str, i: int, out: Path, proc: subprocess.Popen[bytes]) -> bool:
    """Wait until the run is in ``phase`` (try ``i`` moves the moment a little); False if
    the run ended first."""
    if phase == "startup":  # hosts started, importing torch, no GO yet
        ok = _wait(lambda: _started(out) >= 1 + i % 2, proc, 120)
        time.sleep(0.25 * i)
        return ok and not _traces_contain(out, '"proc_start"', "h*.jsonl")
    if phase == "midrun":
        return _wait(lambda: _traces_contain(out, f'"step":{2 + i}}}'), proc, 180)
    # recovery (a worker crash) or partition (the cut is in force): after the fault starts
    ok = _wait(lambda: _traces_contain(out, '"phase":"start"', "launcher.jsonl")
               or _traces_contain(out, '"kind":"fault"'), proc, 180)
    time.sleep(0.4 * i)
    return ok and proc.poll() is None


def _listening_ports() -> set[int]:
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A":  # LISTEN
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def _run_ports(out: Path) -> set[int]:
    ports = set()
    for path in (_real(out) / "addr").glob("*"):
        try:
            ports.add(int(path.read_text().strip().rpartition(":")[2]))
        except (OSError, ValueError):
            continue
    for path in (_real(out) / "specs").glob("*.json"):
        try:
            port = json.loads(path.read_text())["args"]["knobs"].get("store_port")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(port, int):
            ports.add(port)
    return ports


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def count(out: Path, tmp: Path, launcher: int) -> Leftovers:
    """What the run under ``out`` (private TMPDIR ``tmp``, launcher pid) left now."""
    marker = str(out.resolve())
    procs, wardens = [], []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        cmd = _cmdline(pid)
        if marker in cmd:
            procs.append(f"{pid}: {cmd}")
        elif "elastic_sim.real.warden" in cmd and f"TMPDIR={tmp}".encode() in _environ(pid):
            wardens.append(int(pid))
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout
    spaces = [ln.split()[0] for ln in listed.splitlines()
              if ln.startswith(f"es-{launcher}-")]
    listening = sorted(_run_ports(out) & _listening_ports())
    temp = sorted(str(p) for p in tmp.rglob("*"))
    return Leftovers(procs, spaces, listening, temp, wardens)


def left_after(out: Path, tmp: Path, launcher: int, grace: float = 10.0) -> Leftovers:
    """What the run left once it is all gone, or ``grace`` seconds from now at the latest:
    counted every quarter second, and an empty count counted again half a second later
    (nothing of a run that is all gone can start anything again)."""
    deadline = time.monotonic() + grace
    while True:
        left = count(out, tmp, launcher)
        if left.total == 0:
            time.sleep(0.5)
            left = count(out, tmp, launcher)
            if left.total == 0:
                return left
        if time.monotonic() >= deadline:
            return left
        time.sleep(0.25)


def kill_once(scenario: Path, phase: str, i: int, base: Path, grace: float = 10.0
              ) -> tuple[bool, Leftovers]:
    """One run, its launcher SIGKILLed in ``phase``; (whether the phase was reached, what
    was left when it was all gone or ``grace`` seconds later: :func:`left_after`)."""
    out, tmp = base / f"{phase}-{i}", base / f"tmp-{phase}-{i}"
    tmp.mkdir(parents=True)
    proc = start(scenario, out, tmp)
    try:
        reached = reach(phase, i, out, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    return reached, left_after(out, tmp, proc.pid, grace)
