"""What a killed real run could leave is cleaned by the next one, and an unwritable
``--out`` is refused before anything starts; the warden cleans up after a launcher that
can no longer do it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.real.faults import netns
from elastic_sim.real.supervisor import reaper, warden
from elastic_sim.real.supervisor.launcher import clean_leftovers
from elastic_sim.real.supervisor.workdir import RunDir
from tests.procs import processes_mentioning

ROOT = Path(__file__).resolve().parents[2]


def _marked_sleeper(marker: str) -> subprocess.Popen[bytes]:
    """A process carrying a run's marker on its command line, in a session of its own
    (as a host process whose launcher was killed would be). Returned once its command line
    shows the marker: until the child has exec'd, it carries pytest's (a loaded machine
    made a scan miss it)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker],
                            start_new_session=True)
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 30
    while marker.encode() not in cmdline.read_bytes():
        assert time.monotonic() < deadline, "the sleeper never exec'd"
        time.sleep(0.01)
    return proc


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_next_run_kills_processes_an_earlier_run_left_in_its_directory(
        tmp_path: Path) -> None:
    marker = RunDir(tmp_path / "real").marker
    left = _marked_sleeper(marker)
    try:
        clean_leftovers(marker)
        assert left.wait(timeout=10) == -9
        assert processes_mentioning(marker) == []
    finally:
        left.kill()
        left.wait()


@pytest.mark.skipif(bool(netns.missing()), reason=netns.missing() or "")
def test_the_next_run_deletes_namespaces_of_dead_launchers(tmp_path: Path) -> None:
    name = f"{netns.Namespace.PREFIX}{_dead_pid()}-0"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        clean_leftovers(RunDir(tmp_path / "real").marker)
        assert name not in netns.existing()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def test_the_warden_cleans_up_when_its_launcher_dies(tmp_path: Path) -> None:
    marker = RunDir(tmp_path / "real").marker
    space = None
    if not netns.missing():
        space = f"{netns.Namespace.PREFIX}{os.getpid()}-warden"
        subprocess.run(["ip", "netns", "add", space], check=True)
    left = _marked_sleeper(marker)
    guard = warden.start(marker, space)
    try:
        time.sleep(0.5)
        assert left.poll() is None and guard.poll() is None  # watching, not cleaning yet
        assert guard.stdin is not None
        guard.stdin.close()  # what a SIGKILL of the launcher does to the pipe
        assert guard.wait(timeout=30) == 0
        assert left.wait(timeout=10) == -9
        assert reaper.scan(marker) == []
        if space is not None:
            assert space not in netns.existing()
    finally:
        left.kill()
        left.wait()
        if space is not None:
            subprocess.run(["ip", "netns", "del", space], capture_output=True, check=False)


@pytest.mark.parametrize("mode", ["sim", "real"])
def test_an_unwritable_out_is_bad_input_and_starts_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "out"
    rc = main(["run", str(ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml"),
               "--mode", mode, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"error: --out: {out}: cannot write there") and "Traceback" not in err
    assert processes_mentioning(str(blocker)) == []
