"""Partitions in real mode: a real network cut (one network namespace per run, nftables
drops between the two sides' loopback addresses), healed on schedule, and nothing of it
left behind; refused, naming what is missing, where the machine cannot cut."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from elastic_sim.cli import main
from elastic_sim.faults.model import OneWayPartition, Partition
from elastic_sim.protocols.api import Runtime
from elastic_sim.real.faults import netns
from elastic_sim.trace import TraceEvent
from elastic_sim.world import HostSpec, World

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios" / "torchelastic"

F = TypeVar("F", bound=Callable[..., Any])


def needs_cut(test: F) -> F:
    """Mark a test that runs real processes under a real network cut."""
    marks = [
        pytest.mark.real,
        pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
        pytest.mark.skipif(bool(netns.missing()), reason=f"no network cut: {netns.missing()}"),
    ]
    for mark in marks:
        test = mark(test)
    return test


SENDS = 30
"""Messages each of h1 and h2 sends to h0, one every 0.1 s from 0.3 s."""


async def cut_messages(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h1 and h2 stream numbered messages to h0, which records each as it arrives and
    says bye once both have said done."""
    if rt.host == "h0":
        done: set[str] = set()
        while len(done) < 2:
            msg = await rt.recv(timeout=30)
            if "done" in msg.body:
                done.add(msg.src)
            else:
                rt.record("got", src=msg.src, seq=msg.body["seq"], sent=msg.body["sent"])
        for src in sorted(done):
            rt.send(src, {"bye": True})
        return 0
    await rt.sleep(0.3)
    for seq in range(SENDS):
        rt.send("h0/main", {"seq": seq, "sent": rt.now()})
        await rt.sleep(0.1)
    rt.send("h0/main", {"done": True})
    await rt.recv(timeout=30)
    return 0


def _world(entry: str, hosts: int) -> World:
    return World(
        hosts=tuple(HostSpec(f"h{i}") for i in range(hosts)),
        entry=f"tests.real.test_real_partition:{entry}",
        args={},
        time_limit=60.0,
    )


def _own_namespaces(pid: int) -> list[str]:
    return [n for n in netns.existing() if n.startswith(f"{netns.Namespace.PREFIX}{pid}-")]


# -- the cut as rules (pure) -----------------------------------------------------------------


def test_a_partition_drops_both_directions_of_connections_across_it_only() -> None:
    cut = Partition(id="p", at=1.0, groups=(("h2",), ("h0",)), duration=2.0)
    drops = netns.drops(cut, ("h0", "h1", "h2"))
    # connections h0 opened to h2, and h2 opened to h0; h1 (in no group) is untouched
    assert drops == [netns.Drop(1, "127.0.1.3"), netns.Drop(3, "127.0.1.1")]


def test_a_one_way_partition_drops_one_direction() -> None:
    cut = OneWayPartition(id="o", at=1.0, src=("h0",), dst=("h1",), duration=2.0)
    drops = netns.drops(cut, ("h0", "h1"))
    assert drops == [
        netns.Drop(1, "127.0.1.2", "original"),  # h0 -> h1 on what h0 opened
        netns.Drop(2, "127.0.1.1", "reply"),  # h0 -> h1 on what h1 opened
    ]
    text = netns.ruleset(2, drops)
    assert "ct mark 1 ct original ip daddr 127.0.1.2 ct direction original drop" in text
    assert f"meta skgid {netns.GID_BASE + 1} ct mark set 2" in text


# -- the cut for real --------------------------------------------------------------------------


@needs_cut
def test_messages_across_a_cut_stall_until_it_heals(tmp_path: Path) -> None:
    from elastic_sim import real

    cut = Partition(id="cut", at=1.0, groups=(("h2",), ("h0",)), duration=1.5)
    events: list[TraceEvent] = []
    result = real.run(_world("cut_messages", 3), [cut], 7, tmp_path / "run", events.append)

    assert _own_namespaces(os.getpid()) == []
    assert result.exit_codes == {"h0/main": 0, "h1/main": 0, "h2/main": 0}
    faults = [e for e in events if e.kind == "fault"]
    assert [(e.host, e.data["phase"], e.data["target"]) for e in faults] == [
        ("*", "start", [["h2"], ["h0"]]),
        ("*", "heal", [["h2"], ["h0"]]),
    ]
    assert [r.fired for r in result.faults] == [True]
    start, heal = faults[0].t, faults[1].t

    got: dict[str, list[TraceEvent]] = {"h1/main": [], "h2/main": []}
    for e in events:
        if e.kind == "got":
            got[str(e.data["src"])].append(e)
    for src, evs in got.items():  # nothing lost, nothing reordered: the cut only stalls
        assert [e.data["seq"] for e in evs] == list(range(SENDS)), src

    across = [e for e in got["h2/main"] if start <= float(e.data["sent"]) < heal]
    assert len(across) >= 5
    assert all(e.t >= heal for e in across), [(e.data["sent"], e.t) for e in across]
    beside = [e for e in got["h1/main"] if start <= float(e.data["sent"]) < heal - 0.5]
    assert beside and all(e.t < heal for e in beside)  # h1 is in no group: not cut


LAUNCH = textwrap.dedent("""
    import sys
    from elastic_sim import real
    from elastic_sim.faults.model import Partition
    from elastic_sim.world import HostSpec, World
    w = World(hosts=(HostSpec("h0"), HostSpec("h1")), entry="tests.real.entries:sleeper",
              args={"children": ["c"]}, time_limit=120.0)
    cut = Partition(id="cut", at=0.2, groups=(("h0",), ("h1",)), duration=100.0)
    real.run(w, [cut], 1, sys.argv[1], lambda ev: None)
""")


@needs_cut
def test_ctrl_c_leaves_no_namespace_rule_or_process(tmp_path: Path) -> None:
    work = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(work)], cwd=ROOT)
    try:
        marker = work / "trace" / "launcher.jsonl"
        deadline = time.monotonic() + 120
        while not (marker.exists() and '"phase":"start"' in marker.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        (name,) = _own_namespaces(proc.pid)
        assert "drop" in netns.rules_of(name)  # the cut is in place
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _own_namespaces(proc.pid) == []
    assert netns.rules_of(name) == ""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(work) in cmd:
            left.append(cmd)
    assert left == []


@pytest.mark.slow
@needs_cut
def test_partition_heals_scenario_meets_its_expectations_in_real_mode(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(["run", str(SCENARIOS / "partition_heals.yaml"), "--mode", "real",
               "--out", str(out), "--quiet"])
    summary = json.loads((out / "summary.json").read_text())
    unmet = [e for e in summary["expectations"] if not e["ok"]]
    assert (rc, summary["verdict"], unmet) == (0, "pass", [])
    events = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert [e["data"]["phase"] for e in events if e["kind"] == "fault"] == ["start", "heal"]
    assert not [e for e in events if e["kind"] == "agent_restart"]
    assert _own_namespaces(os.getpid()) == []


def test_without_ip_and_nft_a_partition_is_refused_naming_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither ip nor nft on it
    rc = main(["run", str(SCENARIOS / "partition_heals.yaml"), "--mode", "real",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "partition_heals.yaml" in err and "faults[0]" in err and "network cut" in err
    if os.geteuid() == 0:
        assert "'ip' and 'nft'" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(bool(netns.missing()), reason=f"no network cut: {netns.missing()}")
def test_a_namespace_left_by_a_killed_launcher_is_deleted_by_the_next_run() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names a launcher that is gone
    stale = f"{netns.Namespace.PREFIX}{dead.pid}-0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.existing()
        assert stale in netns.sweep_stale()
        assert stale not in netns.existing()
    finally:
        if stale in netns.existing():
            subprocess.run(["ip", "netns", "del", stale], check=False)


class _SlowCut:
    """Targets whose cut takes 5 ms of run time to load (nft does take milliseconds)."""

    def __init__(self) -> None:
        self.now = 1.0
        self.cut_at: float | None = None

    def signal_host(self, host: str, sig: int) -> bool:
        return True

    def signal_proc(self, name: str, sig: int) -> str:
        return ""

    def cut(self, fault: Partition | OneWayPartition) -> str:
        self.now += 0.005
        self.cut_at = self.now  # in force from here
        return ""

    def heal(self, fault: Partition | OneWayPartition) -> str:
        return ""


def test_a_cut_is_traced_from_when_it_is_in_force_not_from_when_it_was_due(
    tmp_path: Path,
) -> None:
    """Otherwise a message sent between the two crosses a cut that the trace says was
    there (CI saw one: sent 1.7 ms after the traced start, delivered at once)."""
    from elastic_sim.real.faults.injector import Injector
    from elastic_sim.real.supervisor.tracefile import TraceFile

    targets = _SlowCut()
    trace = TraceFile(tmp_path / "trace.jsonl")
    cut = Partition(id="cut", at=1.0, groups=(("h0",), ("h1",)), duration=2.0)
    injector = Injector([cut], targets, trace, lambda: targets.now)
    injector.fire_due(1.0)
    (start,) = [json.loads(line) for line in trace.path.read_text().splitlines()]
    assert start["data"]["phase"] == "start"
    assert start["t"] >= targets.cut_at == 1.005
    assert injector.next_due() == 1.005 + 2.0  # the cut lasts its whole duration
    (report,) = injector.reports(10.0)
    assert report.fired and report.at == start["t"]
