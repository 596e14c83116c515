"""``--mode torchrun`` end to end: actual torchrun agents on loopback running a training
script of this test's own (which prints, as scripts do), and nothing of theirs left behind
after a success, a failure (a hung job at the time limit) and a Ctrl-C."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import yaml

from elastic_sim.pipeline import execute
from elastic_sim.real.faults import netns
from elastic_sim.spec import compile_spec
from tests.procs import reaped

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torchrun mode needs torch"),
]

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    x = torch.ones(1)
    for _ in range(3):
        dist.all_reduce(x)
        print("allreduce", x.item(), flush=True)  # a script prints (its stdout: a file)
    print("done", file=sys.stderr, flush=True)
    out = os.path.join(sys.argv[1], f"rank{dist.get_rank()}-of-{dist.get_world_size()}")
    with open(out, "w") as fh:
        fh.write(f"{x.item()} {sys.argv[2]}")
    if sys.argv[2] == "hang":
        time.sleep(3600)
    dist.destroy_process_group()
""")


def scenario(tmp: Path, time_limit: float = 120.0) -> Path:
    """Two hosts, no fault, short rendezvous timeouts."""
    doc = yaml.safe_load((ROOT / "scenarios/torchelastic/worker_crash.yaml").read_text())
    doc["faults"] = []
    doc["expect"] = {}
    doc["time_limit"] = time_limit
    doc["protocol"]["knobs"]["max_restarts"] = 0
    path = tmp / "two_hosts.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def left_with(tag: str) -> list[int]:
    """Processes (but this one) whose environment carries ``tag``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if tag.encode() in env:
            found.append(int(pid))
    return found


def test_user_script_trains_under_torchrun_and_leaves_nothing(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    tag = f"ES_TEST_TAG={uuid.uuid4().hex}"
    monkeypatch.setenv(*tag.split("="))
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = tmp_path / "done"
    done.mkdir()
    path = scenario(tmp_path)
    report = execute(compile_spec(path, seed=0, mode="torchrun",
                                  script=(str(script), str(done), "hello")), tmp_path / "run")
    # Both ranks ran the script with its arguments, in one world of two (allreduce of 1s
    # three times over two ranks: 8).
    assert sorted(p.name for p in done.iterdir()) == ["rank0-of-2", "rank1-of-2"]
    assert {p.read_text() for p in done.iterdir()} == {"8.0 hello"}
    m = report.metrics
    assert m.outcome == "completed", m.errors
    assert [(r.members, r.ranks) for r in m.rounds] == [(["h0", "h1"], {"h0": 0, "h1": 1})]
    assert report.result.exit_codes == {"h0/main": 0, "h1/main": 0}
    checks = {c.name: c for c in report.checks}
    # Judged from upstream's events: ranks and master; the script's own are n/a.
    assert checks["rank_validity"].checked == 1 and not checks["rank_validity"].not_judged
    assert checks["master_agreement"].checked == 1
    for name in ("state_agreement", "collective_sequence", "membership_agreement"):
        assert checks[name].not_judged, name
    setup = next(e for e in report.events if e.kind == "torchrun_setup")
    if not netns.missing():  # torch's stores listen on every interface: contained
        assert setup.get("network") == "a private network namespace"
    assert [n for n in netns.existing() if n.startswith(f"es-{os.getpid()}-")] == []
    # What the script printed, per rank, where torchrun's --log-dir puts it.
    outputs = sorted((tmp_path / "run").glob("torchrun/logs/*/*/attempt_0/0/stdout.log"))
    assert [p.read_text().splitlines() for p in outputs] == [
        ["allreduce 2.0", "allreduce 4.0", "allreduce 8.0"]] * 2
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {c["name"] for c in summary["checks"] if "not_judged" in c} >= {
        "state_agreement", "membership_agreement"}
    assert left_with(tag) == []


def test_hung_job_is_killed_at_the_time_limit(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    tag = f"ES_TEST_TAG={uuid.uuid4().hex}"
    monkeypatch.setenv(*tag.split("="))
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    path = scenario(tmp_path, time_limit=25.0)
    report = execute(compile_spec(path, seed=0, mode="torchrun",
                                  script=(str(script), str(tmp_path), "hang")), tmp_path / "run")
    assert report.metrics.outcome == "hung"
    assert report.result.hung
    assert left_with(tag) == []


def _hanging_cli(tmp_path: Path, tag: str, out: int | None) -> subprocess.Popen[bytes]:
    """The CLI running a torchrun-mode scenario whose script hangs, tagged ``tag`` in its
    environment (stdout/stderr piped, or sent to ``out``)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    path = scenario(tmp_path)
    env = {**os.environ, "ES_TEST_TAG": tag, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "elastic_sim.cli", "run", str(path), "--mode", "torchrun",
         "--out", str(tmp_path / "run"), "--no-report", "--script", str(script), "--",
         str(tmp_path), "hang"], env=env,
        stdout=subprocess.PIPE if out is None else out,
        stderr=subprocess.PIPE if out is None else out)


def _wait_until_training(cli: subprocess.Popen[bytes], tmp_path: Path, tag: str) -> None:
    deadline = time.monotonic() + 150
    while not list(tmp_path.glob("rank*")) and time.monotonic() < deadline:
        assert cli.poll() is None, cli.communicate()
        time.sleep(0.2)
    assert list(tmp_path.glob("rank*")), "the script never ran"
    assert len(left_with(f"ES_TEST_TAG={tag}")) >= 4  # the CLI, agents, workers


def test_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    with reaped(_hanging_cli(tmp_path, tag, None)) as cli:
        _wait_until_training(cli, tmp_path, tag)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=60)
    assert cli.returncode == 130, err
    assert b"interrupted" in err
    assert left_with(f"ES_TEST_TAG={tag}") == []
    assert not (tmp_path / "run" / "trace.jsonl").exists()  # nothing half-written


def test_a_sigkilled_cli_leaves_nothing(tmp_path: Path) -> None:
    """The CLI killed with SIGKILL cannot clean up: its warden kills the torchrun agents
    (sessions of their own) and their workers, found by the run's mark in their
    environment (before the warden, they ran on forever)."""
    tag = uuid.uuid4().hex
    with reaped(_hanging_cli(tmp_path, tag, subprocess.DEVNULL)) as cli:
        _wait_until_training(cli, tmp_path, tag)
        cli.kill()
        cli.wait()
    deadline = time.monotonic() + 30
    while left_with(f"ES_TEST_TAG={tag}") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left_with(f"ES_TEST_TAG={tag}") == []
