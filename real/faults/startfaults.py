"""Start-up faults in real mode: what the injector tells a host's processes about the
processes they start (a crash loop, a slow start), through one small JSON file per host in
the run directory, ``start-faults/<host>.json``.

The injector writes the file when the fault fires; the host's process that starts a child
reads it then (only that process starts processes on its host, so it alone rewrites the
count a bounded crash loop keeps) and hands the child its fate in its environment: the
child, once its interpreter and torch are up, sleeps the extra start-up delay, or fails
with :class:`~elastic_sim.faults.model.CrashAtStart`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FAIL = "ELASTIC_SIM_START_FAIL"
"""Environment: why the process fails at start-up."""
DELAY = "ELASTIC_SIM_START_DELAY"
"""Environment: extra seconds of start-up."""


def _path(workdir: Path, host: str) -> Path:
    return workdir / "start-faults" / f"{host}.json"


def _read(workdir: Path, host: str) -> dict[str, Any]:
    try:
        data = json.loads(_path(workdir, host).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"loops": [], "delay": 0.0}
    return data if isinstance(data, dict) else {"loops": [], "delay": 0.0}


def _write(workdir: Path, host: str, data: dict[str, Any]) -> None:
    path = _path(workdir, host)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(data), encoding="utf-8")
    os.replace(part, path)  # readers see the old file or the new one, never half


def add_loop(workdir: Path, host: str, fid: str, to: str, starts: int | None) -> None:
    """From now on, processes ``to`` ("workers", "agent", "any") started on ``host`` fail
    at start-up, the next ``starts`` of them (None: all)."""
    data = _read(workdir, host)
    data["loops"].append({"id": fid, "to": to, "left": starts})
    _write(workdir, host, data)


def add_delay(workdir: Path, host: str, seconds: float) -> None:
    """From now on, processes started on ``host`` take ``seconds`` longer to start."""
    data = _read(workdir, host)
    data["delay"] = float(data.get("delay", 0.0)) + seconds
    _write(workdir, host, data)


def take(workdir: Path, host: str, is_agent: bool) -> dict[str, str]:
    """The environment for a process being started on ``host`` now (its start-up
    faults), spending one start of the crash loop that dooms it."""
    data = _read(workdir, host)
    env: dict[str, str] = {}
    if data.get("delay"):
        env[DELAY] = repr(float(data["delay"]))
    for loop in data["loops"]:
        hits = loop["to"] == "any" or (loop["to"] == "agent") == is_agent
        if hits and loop["left"] != 0:
            if loop["left"] is not None:
                loop["left"] -= 1
                _write(workdir, host, data)
            env[FAIL] = f"crash loop {loop['id']}: fails at start-up"
            break
    return env
