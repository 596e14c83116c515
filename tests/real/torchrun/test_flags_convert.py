"""``--mode torchrun`` without running torch: the scenario as torchrun's command line, and
torchelastic's streams as the project's trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elastic_sim.checks import run_checks
from elastic_sim.real.torchrun import refusal
from elastic_sim.real.torchrun.convert import Inputs, convert
from elastic_sim.real.torchrun.flags import commands, knob_problem, unmapped
from elastic_sim.reports.metrics import compute
from elastic_sim.scenario import load_scenario
from elastic_sim.trace import TraceEvent

ROOT = Path(__file__).resolve().parents[3]


def test_knobs_become_torchrun_flags() -> None:
    sc = load_scenario(ROOT / "scenarios/torchelastic/rank0_host_crash.yaml")
    knobs = sc.knobs()
    cmds = commands(["h0", "h1", "h2"], "h2", 4242, knobs, {"steps": 5}, 7, ())
    by_host = {c.host: c for c in cmds}
    h0 = by_host["h0"].argv
    assert "--nnodes=2:3" in h0 and "--rdzv-backend=c10d" in h0
    assert "--max-restarts=2" in h0 and "--monitor-interval=0.1" in h0
    assert "--shutdown-timeout=5" in h0  # a whole float as torchrun's int
    # The rendezvous store is served by the store host's agent, at its address.
    assert f"--rdzv-endpoint={by_host['h2'].address}:4242" in h0
    conf = {c.host: next(a for a in c.argv if a.startswith("--rdzv-conf=")) for c in cmds}
    assert "is_host=1" in conf["h2"] and "is_host=0" in conf["h0"]
    assert "heartbeat_timeout=1" in conf["h0"] and "join_timeout=60" in conf["h0"]
    # Each host its own address, in the order of host names (upstream sorts nodes by it).
    addrs = [by_host[h].address for h in ("h0", "h1", "h2")]
    assert len(set(addrs)) == 3 and addrs == sorted(addrs)
    assert f"--local-addr={addrs[0]}" in h0
    # The bundled worker gets the workload and pg_timeout.
    assert h0[-4].endswith("worker.py") and json.loads(h0[-3]) == {"steps": 5}
    assert h0[-2:] == ["7", "10.0"]
    assert unmapped(knobs) == {"exit_barrier_timeout": 300.0}


def test_user_script_replaces_the_worker() -> None:
    cmd = commands(["h0", "h1"], "h0", 1, {}, {}, 0, ("/x/train.py", "--lr", "1"))[0]
    assert cmd.argv[-3:] == ["/x/train.py", "--lr", "1"]
    assert "--nnodes=2:2" in cmd.argv


def test_refusals() -> None:
    assert refusal("horovod", {}) is not None
    assert refusal("torchelastic", {"heartbeat_timeout": 1.5}) == (
        "protocol.knobs.heartbeat_timeout", knob_problem({"heartbeat_timeout": 1.5})[1])
    assert refusal("torchelastic", {"heartbeat_timeout": 2.0}) is None


def _stream(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines) + '{"torn')
    return path


def _rdzv(t: float, msg: str, state: str = "RUNNING") -> dict[str, Any]:
    return {"t": t, "src": "event", "event": {"message": msg, "node_state": state}}


def _log(t: float, text: str) -> dict[str, Any]:
    return {"t": t, "src": "log", "text": text}


def _complete(t: float, master: str) -> dict[str, Any]:
    return _log(t, f"[default] Rendezvous complete for workers. Result:\n  restart_count=0\n"
                   f"  master_addr={master}\n  master_port=99\n  group_rank=0\n")


def test_streams_become_the_trace(tmp_path: Path) -> None:
    t0 = 1000.0
    joined = ("The node 'x' has joined round {} of the rendezvous 'r' as rank {} in a world "
              "of size {}.")
    a0 = _stream(tmp_path / "a0.jsonl", [
        _rdzv(t0 + 0.5, "The node 'x' attempts to join the next round of the rendezvous 'r'."),
        _rdzv(t0 + 1.0, joined.format(0, 0, 2)), _complete(t0 + 1.01, "127.0.1.1"),
        _log(t0 + 1.02, "[default] Starting worker group"),
        _log(t0 + 5.0, "[default] Worker group FAILED. 3/3 attempts left; will restart worker "
                       "group"),
        _log(t0 + 5.0, "failed (exitcode: 1) local_rank: 0 (pid: 11) of binary: x"),
        _rdzv(t0 + 5.1, "The node 'x' attempts to join the next round of the rendezvous 'r'."),
        _rdzv(t0 + 6.0, joined.format(1, 0, 1)), _complete(t0 + 6.01, "127.0.1.1"),
        _rdzv(t0 + 9.0, "The node 'x' has closed the rendezvous 'r'.", "SUCCEEDED"),
        {"t": t0 + 9.5, "src": "end", "code": 0, "checkpoint": {"step": 20, "digest": "d"}},
    ])
    a1 = _stream(tmp_path / "a1.jsonl", [
        _rdzv(t0 + 0.6, "The node 'y' attempts to join the next round of the rendezvous 'r'."),
        _rdzv(t0 + 1.1, joined.format(0, 1, 2)), _complete(t0 + 1.11, "127.0.1.1"),
    ])
    w = tmp_path / "w.jsonl"
    w.write_text(json.dumps({"t": t0 + 2, "host": "h1", "proc": "h1/w0", "kind": "proc_start",
                             "data": {"pid": 12}}) + "\n"
                 + json.dumps({"t": t0 + 3, "host": "h1", "proc": "h1/w0", "kind": "step",
                               "data": {"round": 0, "step": 1}}) + "\n")
    fault = TraceEvent(4.0, "h1", "fault-injector", "fault",
                       {"id": "crash-h1", "type": "crash", "target": "h1", "phase": "start"})
    events = convert(Inputs(
        t0=t0, hosts=["h0", "h1"], addresses={"h0": "127.0.1.1", "h1": "127.0.1.2"},
        streams={"h0": a0, "h1": a1}, worker_files=[w], launcher_events=[fault],
        agent_codes={"h0": 0, "h1": -9}, agent_exit_t={"h0": 9.6, "h1": 4.1},
        killed={"h1": (4.0, "crash-h1")}, end=9.6))
    done = [e for e in events if e.kind == "rdzv_done"]
    assert [(e.host, e.get("round"), e.get("rank"), e.get("members"), e.get("master"))
            for e in done] == [("h0", 0, 0, ["h0", "h1"], "h0:99"),
                               ("h1", 0, 1, ["h0", "h1"], "h0:99"),
                               ("h0", 1, 0, ["h0"], "h0:99")]
    assert [e.get("round") for e in events if e.kind == "rdzv_join"] == [0, 0, 1]
    restart = next(e for e in events if e.kind == "agent_restart")
    assert (restart.t, restart.get("reason"), restart.get("remaining_restarts")) == (
        5.0, "FAILED", 2)
    exits = {(e.proc, e.get("code"), e.get("reason")) for e in events if e.kind == "proc_exit"}
    assert exits == {("h1/w0", -9, "killed by fault crash-h1"),
                     ("h1/main", -9, "killed by fault crash-h1"),
                     ("h0/main", 0, "exited with code 0")}
    assert next(e for e in events if e.kind == "job_done").get("step") == 20
    assert [e.t for e in events] == sorted(e.t for e in events)
    m = compute(events, 20, {}, False, 9.6)
    assert m.world_sizes == [2, 1] and m.outcome == "completed"
    verdicts = {c.name: c for c in run_checks(events)}
    assert verdicts["limits"].ok and verdicts["master_agreement"].ok


def test_disagreeing_masters_are_caught(tmp_path: Path) -> None:
    """The rank-0 crash bug: one agent told an old master; master_agreement sees it."""
    joined = "has joined round 1 of the rendezvous 'r' as rank {} in a world of size 2."
    a = _stream(tmp_path / "a.jsonl", [_rdzv(1.0, "The node " + joined.format(0)),
                                       _complete(1.0, "127.0.1.2")])
    b = _stream(tmp_path / "b.jsonl", [_rdzv(1.0, "The node " + joined.format(1)),
                                       _complete(1.0, "127.0.1.1")])
    events = convert(Inputs(t0=0.0, hosts=["h1", "h2"],
                            addresses={"h0": "127.0.1.1", "h1": "127.0.1.2",
                                       "h2": "127.0.1.3"},
                            streams={"h1": a, "h2": b}, worker_files=[], launcher_events=[],
                            agent_codes={}, agent_exit_t={}, end=2.0))
    check = {c.name: c for c in run_checks(events)}["master_agreement"]
    assert not check.ok
