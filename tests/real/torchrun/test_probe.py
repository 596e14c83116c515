""":mod:`elastic_sim.probe`, what a training script calls to be measured: silent and light
outside elastic-sim, and under it the very events the bundled worker writes (which writes
through it), read back into the run's trace with what only the agents saw filled in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from elastic_sim.probe import digest, open_probe
from elastic_sim.real.torchrun import Options, not_judged, script_steps, steps
from elastic_sim.real.torchrun.convert import Inputs, convert
from elastic_sim.trace import TraceEvent
from elastic_sim.trace_kinds import BY_KIND, field_names

CALLS = """
from elastic_sim import probe
probe.restore(50, b"state-50")
probe.sync(50, b"state-50")
with probe.collective("allreduce", 68):
    pass
probe.step(51)
probe.commit(60, [b"state-", b"60"])
print(probe.active())
"""


def _python(code: str, env: dict[str, str]) -> str:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith("ELASTIC_SIM_") and k not in ("RANK", "LOCAL_RANK")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**keep, **env},
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def _worker_env(trace_dir: Path) -> dict[str, str]:
    return {"ELASTIC_SIM_TRACE_DIR": str(trace_dir), "ELASTIC_SIM_HOST": "h1",
            "LOCAL_RANK": "0", "RANK": "1", "ELASTIC_SIM_ROUND": "2",
            "TORCHELASTIC_RESTART_COUNT": "1"}


def test_outside_elastic_sim_every_call_does_nothing(tmp_path: Path) -> None:
    assert _python(CALLS, {"LOCAL_RANK": "0", "RANK": "0"}) == "False"
    assert list(tmp_path.iterdir()) == []


def test_importing_it_imports_nothing_beyond_the_standard_library() -> None:
    code = """
        import sys
        before = set(sys.modules)
        import elastic_sim.probe
        new = {m.split(".")[0] for m in set(sys.modules) - before}
        print(sorted(new - set(sys.stdlib_module_names) - {"elastic_sim"}))
    """
    assert _python(code, {}) == "[]"


def test_a_workers_calls_are_the_trace_events_of_the_bundled_worker(tmp_path: Path) -> None:
    assert _python(CALLS, _worker_env(tmp_path)) == "True"
    (path,) = tmp_path.iterdir()
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert path.name == f"worker-h1-{lines[0]['data']['pid']}.jsonl"
    assert {(ln["host"], ln["proc"]) for ln in lines} == {("h1", "h1/w0")}
    got = [(ln["kind"], ln["data"]) for ln in lines[1:]]
    assert got == [
        ("restore", {"step": 50, "digest": digest(b"state-50"), "reason": "checkpoint"}),
        ("sync", {"round": 2, "rank": 1, "root": 0, "step": 50, "digest": digest(b"state-50")}),
        ("coll_enter", {"group": "te-round2", "seq": 0, "op": "allreduce", "nbytes": 68}),
        ("coll_done", {"group": "te-round2", "seq": 0, "op": "allreduce"}),
        ("step", {"round": 2, "step": 51}),
        ("commit", {"step": 60, "digest": digest(b"state-60")}),
    ]
    start = lines[0]
    assert start["kind"] == "proc_start" and start["data"]["restart_count"] == 1
    assert start["t"] <= lines[1]["t"]  # when the process started, not its first call
    for ln in lines:  # every field as docs/trace-events.md lists it
        fields = set(field_names(BY_KIND[ln["kind"]]))
        required = {f for f, _ in BY_KIND[ln["kind"]].fields if not f.endswith("?")}
        assert required <= set(ln["data"]) <= fields, ln


def test_a_process_forked_from_a_worker_writes_nothing(tmp_path: Path) -> None:
    code = """
        import os
        from elastic_sim import probe
        probe.step(1)
        pid = os.fork()
        if pid == 0:
            probe.step(99)
            os._exit(0)
        os.waitpid(pid, 0)
    """
    _python(code, _worker_env(tmp_path))
    (path,) = tmp_path.iterdir()
    assert [json.loads(ln)["kind"] for ln in path.read_text().splitlines()] == [
        "proc_start", "step"]


def test_a_failed_collective_is_recorded_and_raised(tmp_path: Path) -> None:
    probe = open_probe(_worker_env(tmp_path))
    assert probe is not None
    try:
        with probe.collective("broadcast", 8):
            raise ConnectionError("peer gone")
    except ConnectionError:
        pass
    (path,) = tmp_path.iterdir()
    last = json.loads(path.read_text().splitlines()[-1])
    assert (last["kind"], last["data"]) == ("coll_fail", {
        "group": "te-round2", "seq": 0, "op": "broadcast", "error": "ConnectionError"})


def _log(t: float, text: str) -> dict[str, Any]:
    return {"t": t, "src": "log", "text": text}


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    return path


def _worker(host: str, pid: int, t: float, rank: int, rnd: int, first: int, last: int
            ) -> list[dict[str, Any]]:
    """A script's worker lines as the probe writes them: started at ``t``, synced to
    ``first - 1`` from rank 0, steps ``first``..``last`` 0.1 s apart."""
    ev = [{"t": t, "kind": "proc_start", "data": {"entry": "train.py", "pid": pid}},
          {"t": t + 1, "kind": "sync", "data": {"round": rnd, "rank": rank, "root": 0,
                                                "step": first - 1, "digest": "d"}}]
    ev += [{"t": t + 1 + 0.1 * (s - first + 1), "kind": "step",
            "data": {"round": rnd, "step": s}} for s in range(first, last + 1)]
    return [{**e, "host": host, "proc": f"{host}/w0"} for e in ev]


def test_a_scripts_workers_end_and_sync_as_their_agents_saw(tmp_path: Path) -> None:
    """A script writes no proc_exit: the first generation of h0's worker was stopped by
    its agent (upstream's closing signal), the second returned (its agent entered the
    exit barrier); each sync names the host of rank 0; the job's end says the last step."""
    joined = ("The node 'x' has joined round {} of the rendezvous 'r' as rank 0 in a world "
              "of size 1.")
    agent = _write(tmp_path / "a0.jsonl", [
        {"t": 1.0, "src": "event", "event": {"message": joined.format(0)}},
        _log(1.1, "[default] Starting worker group"),
        _log(4.0, "Sending process 11 closing signal SIGTERM"),
        {"t": 4.5, "src": "event", "event": {"message": joined.format(1)}},
        _log(4.6, "[default] Starting worker group"),
        _log(9.0, "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds"),
        {"t": 9.5, "src": "end", "code": 0, "checkpoint": None},
    ])
    first = _write(tmp_path / "w11.jsonl", _worker("h0", 11, 1.2, 0, 0, 1, 20))
    second = _write(tmp_path / "w12.jsonl", _worker("h0", 12, 4.7, 0, 1, 11, 40))
    events = convert(Inputs(t0=0.0, hosts=["h0"], addresses={"h0": "127.0.1.1"},
                            streams={"h0": agent}, worker_files=[first, second],
                            launcher_events=[], agent_codes={"h0": 0},
                            agent_exit_t={"h0": 9.6}, end=9.6))
    exits = [(e.t, e.get("code"), e.get("reason")) for e in events
             if e.kind == "proc_exit" and e.proc == "h0/w0"]
    assert exits == [(4.0, -15, "stopped by its agent (SIGTERM)"),
                     (9.0, 0, "returned (its agent saw its worker group succeed)")]
    assert {e.get("root") for e in events if e.kind == "sync"} == {"h0"}
    assert next(e for e in events if e.kind == "job_done").get("step") == 40


def _ev(kind: str, proc: str = "h0/w0", **data: Any) -> TraceEvent:
    return TraceEvent(1.0, proc.partition("/")[0], proc, kind, data)


def test_what_a_script_leaves_unjudged_is_what_it_did_not_record() -> None:
    script = Options(script=("/x/train.py", "--steps", "80"))
    silent = [_ev("proc_start", "h0/main"), _ev("rdzv_done", "h0/main", round=0)]
    assert set(not_judged(script, silent)) >= {
        "collective_sequence", "state_agreement", "committed_progress", "epoch_isolation",
        "progress_after_faults"}
    assert steps(script, 120, silent) == 0
    probed = [*silent, _ev("proc_start"), _ev("sync", digest=""), _ev("step", step=1),
              _ev("commit", step=1, digest="")]
    why = not_judged(script, probed)
    assert set(why) == {"membership_agreement", "rendezvous_closed_by_job_end",
                        "collective_sequence", "epoch_isolation", "state_agreement"}
    assert "carry no state" in why["state_agreement"]
    full = [*probed, _ev("sync", digest="d"), _ev("coll_enter", group="g", seq=0)]
    assert set(not_judged(script, full)) == {"membership_agreement",
                                             "rendezvous_closed_by_job_end"}
    assert steps(script, 120, probed) == 80
    assert steps(Options(script=("/x/train.py",)), 120, probed) == 120
    assert steps(Options(), 120, silent) == 120
    # A script that imports the probe but dies before its first step still trains 80.
    started = [*silent, _ev("proc_start")]
    assert steps(script, 120, started) == 80
    assert "never reached" in not_judged(script, started)["progress_after_faults"]


def test_the_steps_a_script_is_given() -> None:
    assert script_steps(["--steps", "7"]) == 7
    assert script_steps(["--lr", "1", "--steps=12"]) == 12
    assert script_steps(["--steps", "many"]) is None
    assert script_steps(["--max-steps", "5"]) is None
