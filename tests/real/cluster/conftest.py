"""Shared pieces of the cluster-mode tests: running the CLI as a user would, and what a
finished run left on the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCALE_DOWN = ROOT / "scenarios" / "torchelastic" / "scale_down.yaml"
PARTITION = ROOT / "scenarios" / "torchelastic" / "partition_heals.yaml"
CLI = [sys.executable, "-m", "elastic_sim.cli"]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600,
        prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``elastic-sim ARGS`` in a child process (its own pid names its namespaces)."""
    return subprocess.run([*prefix, *CLI, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def summary(out: Path) -> dict[str, Any]:
    """A run's ``summary.json``."""
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def events(out: Path, kind: str) -> list[dict[str, Any]]:
    """A run's trace events of one kind."""
    with (out / "trace.jsonl").open() as fh:
        return [e for e in map(json.loads, fh) if e["kind"] == kind]


def namespaces_of(pid: int) -> list[str]:
    """Network namespaces named for launcher ``pid`` (``es-<pid>-...``)."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return [line.split()[0] for line in done.stdout.splitlines()
            if line.startswith(f"es-{pid}-")]


def listeners_of(pids: set[int]) -> list[str]:
    """Local addresses that processes ``pids`` listen on (TCP), from ``ss``."""
    done = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False)
    found = []
    for line in done.stdout.splitlines():
        if any(f"pid={p}," in line for p in pids):
            found.append(line.split()[3])
    return found


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo.extend(children.get(p, []))
    return out


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    """A one-machine Slurm set up by the project's script; skip with its reason if not."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-setup.sh")],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.skip(f"no Slurm here: {done.stderr.strip()}")
    conf = done.stdout.strip().splitlines()[-1].removeprefix("export SLURM_CONF=")
    return {**os.environ, "SLURM_CONF": conf}
