"""elastic_sim.real.supervisor.reaper.kill_run: nothing of a run is left, not even a zombie,
including processes the run never registered and whose command lines carry no marker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic_sim.real.supervisor import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")


def zombie_children() -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if state == "Z" and int(ppid) == os.getpid():
            out.append(int(name))
    return out


def test_kill_run_reaps_an_unregistered_orphan_of_a_leaders_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    # The leader leaves a grandchild in its process group: no marker on its command line,
    # not in the known list; when the leader dies it is adopted by this (subreaper) process.
    script = f"sleep 300 & echo $! > {pidfile}; exec sleep 300"
    was = reaper.set_subreaper(True)
    try:
        leader = subprocess.Popen(["sh", "-c", script], start_new_session=True)
        deadline = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline, "the grandchild did not start"
            time.sleep(0.01)
        grandchild = int(pidfile.read_text())
        assert reaper.start_time(grandchild) > 0
        assert reaper.kill_run("no-such-marker", [leader], list, timeout=10.0)
    finally:
        reaper.set_subreaper(was)
    assert leader.returncode == -9
    assert reaper.start_time(grandchild) == -1  # gone: killed and reaped, not a zombie
    assert zombie_children() == []


def test_kill_run_leaves_a_recycled_leader_pid_alone() -> None:
    # A leader reaped earlier, whose pid (and so group id) a stranger now holds.
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)

    class Gone:
        pid = stranger.pid

        def poll(self) -> int:
            return 0

    try:
        assert reaper.kill_run("no-such-marker", [Gone()], list, timeout=1.0)  # type: ignore[list-item]
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
