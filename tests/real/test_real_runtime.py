"""The real runtime, end to end: hosts as OS processes, TCP messages, a TCPStore, Gloo
groups, faults by signals, child processes, and no process left behind."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.faults.model import CrashHost, CrashProcess, Fault, HangHost, Partition
from elastic_sim.trace import TraceEvent
from elastic_sim.world import HostSpec, RunResult, World
from tests.procs import reaped

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="real mode needs torch"),
]

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = "tests.real.entries"


def world(entry: str, hosts: int, time_limit: float = 60.0, **args: Any) -> World:
    return World(
        hosts=tuple(HostSpec(f"h{i}") for i in range(hosts)),
        entry=f"{ENTRIES}:{entry}",
        args=args,
        time_limit=time_limit,
    )


def leftovers(workdir: Path) -> list[str]:
    """Processes of this run still alive, and zombies this test process has not reaped."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if str(workdir) in cmd or (state == "Z" and int(ppid) == os.getpid()):
            found.append(f"{pid} {state}: {cmd}")
    return found


def run(
    tmp_path: Path, w: World, faults: Sequence[Fault] = ()
) -> tuple[RunResult, list[TraceEvent]]:
    from elastic_sim import real

    events: list[TraceEvent] = []
    result = real.run(w, faults, seed=7, workdir=tmp_path / "run", emit=events.append)
    assert leftovers(tmp_path / "run") == []
    assert [e.t for e in events] == sorted(e.t for e in events)
    return result, events


def find(events: list[TraceEvent], kind: str, proc: str | None = None) -> list[TraceEvent]:
    return [e for e in events if e.kind == kind and (proc is None or e.proc == proc)]


def one(events: list[TraceEvent], kind: str, proc: str | None = None) -> TraceEvent:
    (ev,) = find(events, kind, proc)
    return ev


def test_hosts_exchange_messages_and_report_exits(tmp_path: Path) -> None:
    faults = [
        # h1 exits about 0.3 s after it starts at 0.5 s, h0 lingers to about 3.3 s: the crash
        # at 2.0 s finds h1 gone with a second to spare either side (at 1.0 s a CI run's
        # load once kept h1 alive past it)
        CrashHost(id="late", at=2.0, host="h1"),
        CrashProcess(id="ghost", at=0.5, proc="h1/nobody"),
    ]
    w = world("pingpong", 2, linger=2.5)
    w = replace(w, hosts=(HostSpec("h0"), HostSpec("h1", start_at=0.5, clock_offset=100.0)))
    result, events = run(tmp_path, w, faults)

    got = one(events, "got", "h0/main")
    assert got.get("src") == "h1/main" and got.get("body") == {"pong": 2}
    assert find(events, "recv_timeout", "h0/main")
    assert result.exit_codes == {"h0/main": 0, "h1/main": 1}
    assert one(events, "proc_exit", "h1/main").get("reason") == "RuntimeError: boom"
    assert {e.proc for e in find(events, "proc_start")} == {"h0/main", "h1/main"}
    reports = {f.id: f for f in result.faults}
    assert not reports["late"].fired and "already exited" in reports["late"].reason
    assert not reports["ghost"].fired and "never started" in reports["ghost"].reason
    assert [e.get("phase") for e in find(events, "fault")] == ["skipped", "skipped"]
    assert not result.hung
    assert 0 <= result.end_time - one(events, "proc_exit", "h0/main").t < 0.3
    assert result.trace_events == len(events)
    assert one(events, "proc_start", "h1/main").t >= 0.5
    clock = one(events, "clock", "h1/main")
    assert clock.get("now") - clock.t == pytest.approx(100.0, abs=0.05)


def test_tasks_futures_and_cancellation_follow_the_contract(tmp_path: Path) -> None:
    _, events = run(tmp_path, world("pingpong", 2))
    assert one(events, "tasks").get("outcome") == [
        "b:42",
        "a cancelled",
        "wait_for timed out",
        "b:42",
    ]
    assert [e.get("tag") for e in find(events, "cancelled")] == ["a"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_store_hosted_by_one_host_serves_another_with_c10d_semantics(tmp_path: Path) -> None:
    result, events = run(tmp_path, world("store_ops", 2, dead_port=_closed_port()))

    assert result.exit_codes == {"h0/main": 0, "h1/main": 0}

    def field(kind: str) -> Any:
        ev = one(events, kind, "h1/main")
        return ev.get("values", ev.get("value"))

    assert one(events, "store_addr").get("addr").startswith("h0:")  # names the host, as in the sim
    assert field("get") == "v"
    assert field("add") == [2, 5]
    assert field("cas") == ["nope", False, "first", "second", "second"]
    assert field("prefixed") == "pv"
    assert field("multi_get") == ["a", "pv", "pv"]
    assert field("delete") == [True, False]
    timeouts = {e.get("op"): e.get("after") for e in find(events, "store_timeout")}
    assert 0.4 <= timeouts["get"] < 2.0  # the client's timeout: 0.5 s
    assert 0.4 <= timeouts["multi_get"] < 2.0  # waits for every key, like get
    assert 0.25 <= timeouts["wait"] < 1.5
    assert one(events, "wait_released").get("after") < 1.0
    assert one(events, "connect_refused").get("after") < 1.5


def test_gloo_group_runs_every_collective(tmp_path: Path) -> None:
    result, events = run(tmp_path, world("collectives", 3, size=3))

    assert set(result.exit_codes.values()) == {0}
    assert [e.get("values") for e in find(events, "allreduce")] == [[6.0, 3.0]] * 3
    assert [e.get("value") for e in find(events, "broadcast")] == ["hello"] * 3
    assert one(events, "recv", "h1/main").get("value") == "p2p"
    assert sorted((e.get("algorithm"), e.get("ok")) for e in find(events, "state_broadcast")) == (
        [("chain", True)] * 3 + [("tree", True)] * 3)
    assert len(find(events, "group_ready")) == 3
    done = {(e.proc, e.get("seq"), e.get("op")) for e in find(events, "coll_done")}
    assert ("h2/main", 3, "barrier") in done
    # h2 aborts: its own next collective fails at once, and its peers see it leave.
    assert find(events, "aborted_fails_at_once", "h2/main")
    for proc in ("h0/main", "h1/main"):
        assert one(events, "peer_left", proc).get("after") < 1.5


def test_a_host_crash_fails_the_collective_of_every_survivor_quickly(tmp_path: Path) -> None:
    # Survivors linger 1 s after their failure (and abort the group, as protocols do), so
    # a quick failure is not the effect of a survivor exiting.
    w = world("allreduce_until_error", 3, size=3, timeout=20.0, linger=1.0)
    result, events = run(tmp_path, w, [CrashHost(id="kill-h2", at=1.5, host="h2")])

    assert result.exit_codes == {"h0/main": 0, "h1/main": 0, "h2/main": -9}
    fault = one(events, "fault")
    assert (fault.get("phase"), fault.get("target")) == ("start", "h2")
    crash = one(events, "proc_exit", "h2/main")
    assert crash.get("reason") == "killed by fault kill-h2"
    assert crash.t == fault.t
    for proc in ("h0/main", "h1/main"):
        assert one(events, "group_error", proc).get("error") == "CollectiveFailed"
        (fail,) = find(events, "coll_fail", proc)
        assert fail.t - fault.t < 0.5, "calibration: a dead peer is seen within ~0.2 s"
    assert result.faults[0].fired and result.faults[0].at == pytest.approx(1.5, abs=0.05)


def test_a_store_host_crash_fails_its_clients_for_good(tmp_path: Path) -> None:
    result, events = run(
        tmp_path, world("store_until_gone", 2), [CrashHost(id="c", at=1.5, host="h0")]
    )

    assert result.exit_codes == {"h0/main": -9, "h1/main": 0}
    gone = one(events, "store_gone", "h1/main")
    assert 0 <= gone.t - one(events, "fault").t < 0.5
    assert find(events, "store_still_gone", "h1/main")


def test_a_hung_host_times_out_its_peers_and_resumes(tmp_path: Path) -> None:
    w = world("allreduce_until_error", 2, size=2, timeout=1.5, linger=2.5, message_peer=True)
    result, events = run(tmp_path, w, [HangHost(id="freeze", at=1.0, host="h1", duration=2.5)])

    assert result.exit_codes == {"h0/main": 0, "h1/main": 0}
    start, heal = find(events, "fault")
    assert (start.get("phase"), heal.get("phase")) == ("start", "heal")
    assert heal.t - start.t == pytest.approx(2.5, abs=0.1)
    # h0 waits the group timeout for its frozen peer...
    assert one(events, "group_error", "h0/main").get("error") == "CollectiveTimeout"
    assert 1.3 <= one(events, "coll_fail", "h0/main").t - start.t <= 2.5
    # ...and h1, frozen for 2.5 s, carries on afterwards.
    gaps = [e.get("gap") for e in find(events, "tick_gap", "h1/main")]
    assert max(gaps) >= 2.3
    assert one(events, "proc_exit", "h1/main").t > heal.t
    # A message sent to the frozen host waits in the network and arrives after the heal.
    got = one(events, "got", "h1/main")
    assert got.get("body") == {"while": "frozen"} and got.t > heal.t


def test_children_exit_codes_signals_and_env(tmp_path: Path) -> None:
    faults = [CrashProcess(id="gone", at=30.0, proc="h0/c_exit")]  # long over by then
    result, events = run(tmp_path, world("parent", 1), faults)

    assert result.exit_codes == {
        "h0/main": 0,
        "h0/c_exit": 3,
        "h0/c_term": 7,
        "h0/c_kill": -9,
        "h0/c_orphan": -9,
    }
    codes = one(events, "child_codes").get("codes")
    assert codes == {"h0/c_exit": 3, "h0/c_term": 7, "h0/c_kill": -9}
    assert one(events, "child_codes").get("poll") == -9
    env = one(events, "child_env", "h0/c_exit")
    assert (env.get("env"), env.get("seen")) == ({"ELASTIC_TEST": "yes"}, "yes")
    assert find(events, "got_term", "h0/c_term")
    assert one(events, "proc_exit", "h0/c_kill").get("reason") == "signal KILL"
    assert one(events, "proc_exit", "h0/c_orphan").get("reason") == "parent exited"
    assert not result.faults[0].fired


def test_time_limit_kills_everything_and_reports_hung(tmp_path: Path) -> None:
    w = world("sleeper", 1, time_limit=4.0, children=["w", "doomed"])
    result, events = run(tmp_path, w, [CrashProcess(id="c", at=3.0, proc="h0/doomed")])

    assert result.hung and result.end_time == 4.0
    assert result.exit_codes == {"h0/main": -9, "h0/w": -9, "h0/doomed": -9}
    assert one(events, "proc_exit", "h0/main").get("reason") == "killed at the time limit"
    assert one(events, "proc_exit", "h0/w").get("reason") == "killed at the time limit"
    assert one(events, "proc_exit", "h0/doomed").get("reason") == "signal KILL"
    assert result.faults[0].fired


def test_ctrl_c_on_the_launcher_leaves_no_process_behind(tmp_path: Path) -> None:
    workdir = tmp_path / "run"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from elastic_sim import real
        from elastic_sim.world import HostSpec, World
        w = World(hosts=(HostSpec("h0"), HostSpec("h1")), entry="{ENTRIES}:sleeper",
                  args={{"children": ["w"]}}, time_limit=120)
        real.run(w, [], 1, Path({str(workdir)!r}), lambda ev: None)
        """
    )
    with reaped(subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )) as launcher:
        deadline = time.monotonic() + 60
        while not (workdir / "trace" / "h1__w.jsonl").exists():
            assert time.monotonic() < deadline and launcher.poll() is None, "run did not start"
            time.sleep(0.1)
        procs = [p for p in leftovers(workdir) if "elastic_sim.real.proc" in p]
        assert len(procs) == 4  # two hosts, each with a child
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    assert leftovers(workdir) == []


def test_launcher_failure_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_sim import real

    monkeypatch.setattr("elastic_sim.real.supervisor.launcher.READY_TIMEOUT", 0.05)
    with pytest.raises(real.supervisor.process.LaunchError, match="not ready"):
        real.run(world("sleeper", 2), [], 1, tmp_path / "run", lambda ev: None)
    assert leftovers(tmp_path / "run") == []


def test_importing_real_does_not_import_torch() -> None:
    code = ("import sys, elastic_sim.real.supervisor.launcher, elastic_sim.real.runtime.runtime; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_partitions_are_refused_before_anything_starts_without_ip_and_nft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_sim import real

    monkeypatch.setenv("PATH", str(tmp_path))

    cut = Partition(id="split-brain", at=1.0, groups=(("h0",), ("h1",)), duration=2.0)
    with pytest.raises(real.UnsupportedInRealMode, match=r"'split-brain'.*--mode sim"):
        real.run(world("pingpong", 2), [cut], 1, tmp_path / "run", lambda ev: None)
    assert not (tmp_path / "run").exists()
