"""Cluster mode for real: every host a node in a network namespace of its own (the
single-machine stand-in for separate machines), nodes started by hand (the plain ``env``
contract), and through a real Slurm. Each run must reach the sim's membership and leave
nothing behind: no process, no namespace (and so no bridge or nft table)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from elastic_sim.real.cluster import wire
from elastic_sim.real.faults import netns
from tests.procs import membership, processes_mentioning
from tests.real.cluster.conftest import (
    CLI,
    PARTITION,
    ROOT,
    SCALE_DOWN,
    cli,
    descendants,
    events,
    listeners_of,
    namespaces_of,
    summary,
)

pytest.importorskip("torch", reason="real mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]

needs_netns = pytest.mark.skipif(bool(netns.missing()), reason=f"netns: {netns.missing()}")


def sim_membership(scenario: Path, tmp_path: Path) -> list[tuple[int, list[str], dict[str, int]]]:
    out = tmp_path / "sim"
    assert cli("run", str(scenario), "--out", str(out), "--quiet", "--no-report").returncode == 0
    return membership(summary(out))


def _left(out: Path, pid: int) -> tuple[list[str], list[str]]:
    return processes_mentioning(str(out)), namespaces_of(pid)


def _netns_run(scenario: Path, out: Path, timeout: float) -> int:
    """A netns run of ``scenario`` into ``out``, to the end and with exit 0; its launcher's
    pid (which names its namespaces)."""
    proc = subprocess.Popen([*CLI, "run", str(scenario), "--mode", "real", "--launcher",
                             "netns", "--out", str(out), "--quiet", "--no-report"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stdout + stderr
    return proc.pid


@needs_netns
def test_each_host_runs_in_a_namespace_of_its_own_and_matches_the_sim(tmp_path: Path) -> None:
    expected = sim_membership(SCALE_DOWN, tmp_path)
    out = tmp_path / "netns"
    pid = _netns_run(SCALE_DOWN, out, timeout=600)
    assert membership(summary(out)) == expected
    syncs = events(out, "clock_sync")
    assert sorted(e["data"]["hosts"][0] for e in syncs) == ["h0", "h1", "h2"]
    assert len({e["data"]["address"] for e in syncs}) == 3  # a network stack each
    assert all(e["data"]["uncertainty"] < 0.05 for e in syncs)
    assert _left(out, pid) == ([], [])


@needs_netns
def test_a_partition_cuts_between_the_namespaces(tmp_path: Path) -> None:
    expected = sim_membership(PARTITION, tmp_path)
    out = tmp_path / "netns"
    done = cli("run", str(PARTITION), "--mode", "real", "--launcher", "netns", "--out",
               str(out), "--quiet", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert membership(summary(out)) == expected
    (start,) = [e for e in events(out, "fault") if e["data"]["phase"] == "start"]
    (heal,) = [e for e in events(out, "fault") if e["data"]["phase"] == "heal"]
    assert "reason" not in start["data"]
    # The cut stalls training (every allreduce needs h2): no step completes inside it.
    steps = [e["t"] for e in events(out, "step")]
    inside = [t for t in steps if start["t"] + 1.0 < t < heal["t"]]
    assert inside == [] and any(t > heal["t"] for t in steps)


def _netns_run_under_way(out: Path) -> subprocess.Popen[str]:
    """A netns run of the scale-down into ``out``, its clocks synced and running."""
    proc = subprocess.Popen([*CLI, "run", str(SCALE_DOWN), "--mode", "real", "--launcher",
                             "netns", "--out", str(out), "--no-report"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not _clocks_synced(out):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(2)  # the run is under way
    return proc


@needs_netns
def test_ctrl_c_and_a_lost_node_leave_nothing_behind(tmp_path: Path) -> None:
    for case in ("ctrl-c", "node-killed"):
        out = tmp_path / case
        proc = _netns_run_under_way(out)
        if case == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        else:
            (node,) = [int(p.split(":")[0]) for p in processes_mentioning("--index 1 ")
                       if str(out) in p]
            os.kill(node, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == (130 if case == "ctrl-c" else 2), stderr
        if case == "node-killed":
            assert "node 1" in stderr and "broke off" in stderr
        time.sleep(1)
        assert _left(out, proc.pid) == ([], []), case


@needs_netns
def test_a_sigkilled_netns_launcher_leaves_no_namespace_and_no_process(
        tmp_path: Path) -> None:
    """The launcher has no chance to clean up; its warden deletes the hub's and the nodes'
    namespaces and kills the nodes' processes, with no later run to sweep them."""
    out = tmp_path / "killed"
    proc = _netns_run_under_way(out)
    assert len(namespaces_of(proc.pid)) == 4  # the hub and three nodes
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while _left(out, proc.pid) != ([], []) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _left(out, proc.pid) == ([], [])


HVD_SPARE_CUT_OFF = """\
name: hvd_spare_cut_off
seed: 0
time_limit: 120
protocol:
  name: horovod
  knobs: {np: 2, min_np: 2, discovery_period: 0.01, batches_per_epoch: 10,
          batches_per_commit: 1, epochs: 3, discovery: {hosts: ["h0:2", "h1:2"]}}
cluster: {hosts: [h0, h1, spare], store_host: h0}
workload: {steps: 30, step_time: 0.1, commit_every: 1, state_bytes: 4096}
faults:
  - {id: cut, type: isolate, host: spare, at: 0, duration: 800}
"""


@needs_netns
def test_a_node_left_with_only_a_daemon_does_not_hold_the_run(tmp_path: Path) -> None:
    """The daemon rule across nodes: the spare's node runs only its sshd stand-in (a
    daemon outside the job, never reached by the driver), so once horovodrun and its
    workers on the other nodes are done the coordinator ends the run, as the sim and the
    local launcher do. Before, the coordinator waited for every node to go idle and the
    completed job read as hung at its time limit."""
    scenario = tmp_path / "hvd_spare_cut_off.yaml"
    scenario.write_text(HVD_SPARE_CUT_OFF)
    sim = tmp_path / "sim"
    assert cli("run", str(scenario), "--out", str(sim), "--quiet", "--no-report").returncode == 0
    out = tmp_path / "netns"
    pid = _netns_run(scenario, out, timeout=300)
    got = summary(out)
    assert got["hung"] is False and got["metrics"]["outcome"] == "completed"
    assert got["metrics"]["end_time"] < 60  # not the 120 s time limit
    # the spare's stand-in ran to the end without an exit to tell, as in the sim
    assert got["exit_codes"] == summary(sim)["exit_codes"]
    assert "spare/main" not in got["exit_codes"]
    assert not [e for e in events(out, "proc_exit") if e["host"] == "spare"]
    assert {tuple(e["data"]["hosts"]) for e in events(out, "clock_sync")} == {
        ("h0",), ("h1",), ("spare",)}
    time.sleep(1)
    assert _left(out, pid) == ([], [])


def _clocks_synced(out: Path) -> bool:
    """Whether the coordinator of the run writing ``out`` has synced the clocks (a run
    works in a staging directory beside ``out`` until it is complete)."""
    return any("clock_sync" in trace.read_text() for trace in
               out.parent.glob(f"{out.name}.part-*/real/trace/coordinator.jsonl"))


def _rogue_hello(port: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    wire.open_channel(sock, "not-the-secret-0123456789", "node", 10).send(
        {"op": "hello", "index": 0, "count": 2, "address": "127.0.0.1"})
    sock.settimeout(10)
    assert sock.recv(1) == b""  # refused: the coordinator closed it
    sock.close()


def test_nodes_started_by_hand_and_a_wrong_hmac_refused(tmp_path: Path) -> None:
    expected = sim_membership(SCALE_DOWN, tmp_path)
    out = tmp_path / "env"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, wire.SECRET_ENV: wire.new_secret()}
    coord = subprocess.Popen([*CLI, "run", str(SCALE_DOWN), "--mode", "real", "--launcher",
                              "env", "--port", str(port), "--nodes", "2", "--out", str(out),
                              "--quiet", "--no-report"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            _rogue_hello(port)
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline and coord.poll() is None
            time.sleep(0.2)
    nodes = [subprocess.Popen([*CLI, "node", "--coordinator", f"127.0.0.1:{port}",
                               "--workdir", str(out / f"node{i}")],
                              cwd=ROOT, env={**env, "RANK": str(i), "WORLD_SIZE": "2"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    listening: set[str] = set()
    while coord.poll() is None:  # what the run listens on, while it runs
        pids = descendants(coord.pid) | {p for n in nodes for p in descendants(n.pid)}
        listening.update(listeners_of(pids))
        time.sleep(0.5)
    stdout, stderr = coord.communicate()
    assert coord.returncode == 0, stdout + stderr
    assert [n.wait(60) for n in nodes] == [0, 0]
    assert membership(summary(out)) == expected
    assert "refused control connection" in stderr and "bad HMAC" in stderr
    (refused,) = events(out, "control_refused")
    assert "bad HMAC" in refused["data"]["why"]
    # Two nodes for three hosts: node 0 runs h0 and h2, node 1 runs h1.
    assert {tuple(e["data"]["hosts"]) for e in events(out, "clock_sync")} == {("h0", "h2"),
                                                                              ("h1",)}
    assert listening and all(addr.startswith("127.0.0.1:") for addr in listening), listening
    assert processes_mentioning(str(out)) == []


def test_through_a_real_slurm_with_the_allocations_node_count(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    expected = sim_membership(SCALE_DOWN, tmp_path)
    out = tmp_path / "slurm"
    done = cli("run", str(SCALE_DOWN), "--mode", "real", "--launcher", "slurm", "--out",
               str(out), "--quiet", "--no-report", env=slurm,
               prefix=("salloc", "--ntasks=3", "--quiet"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert membership(summary(out)) == expected
    assert len(events(out, "clock_sync")) == 3
    assert processes_mentioning(str(out)) == []
