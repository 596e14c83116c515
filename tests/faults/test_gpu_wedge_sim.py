"""``gpu_wedge``: a host's GPU work wedges for good (a kernel that never ends). Its worker
makes no progress; its peers' collectives see nothing, time out at the group's timeout and
NCCL's watchdog tears them down. Its own watchdog, as measured on an H200, sees its
collective queued behind the kernel time out too but cannot tear the process down while
the kernel runs; it signals the debug dump 5 s later, and NCCL's heartbeat monitor ends the
process (SIGABRT) 480 s after that signal. torchrun's defaults (scenarios/torchelastic/
gpu_wedge_heartbeat_monitor.yaml): the store host h0's GPU wedges at 420 s."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.checks import run_checks
from elastic_sim.cli import main
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, build_world, load_scenario, parse_scenario
from elastic_sim.trace import TraceEvent
from elastic_sim.world import NCCL, WATCHDOG_ABORT_CODE
from tests.test_input_rules import refused

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "scenarios" / "torchelastic" / "gpu_wedge_heartbeat_monitor.yaml"
PERIOD = NCCL.heartbeat_timeout
WEDGED = "h0/w0"
PEERS = ("h1/w0", "h2/w0")


def shipped(at: float | None = None, **knobs: Any) -> Scenario:
    """The shipped scenario, its wedge at ``at`` (default: its own), with more knobs."""
    raw = yaml.safe_load(SHIPPED.read_text())
    if at is not None:
        raw["faults"][0]["at"] = at
    raw["protocol"]["knobs"].update(knobs)
    raw.pop("expect")
    return parse_scenario(raw, str(SHIPPED))


def run(sc: Scenario, monitoring: bool = True) -> tuple[list[TraceEvent], str, bool]:
    """The trace, outcome and whether it hung, with NCCL's monitor on or off (the
    profile's ``monitoring``: TORCH_NCCL_ENABLE_MONITORING)."""
    world = build_world(sc, 0)
    world = dataclasses.replace(world, collectives=dataclasses.replace(
        world.collectives, monitoring=monitoring))
    events, metrics, result = simulate(sc, 0, world=world)
    return list(events), metrics.outcome, result.hung


def created(events: list[TraceEvent], proc: str) -> float:
    """When ``proc``'s process group was created."""
    return next(e.t for e in events if e.kind == "group_ready" and e.proc == proc)


def exits(events: list[TraceEvent], proc: str) -> list[TraceEvent]:
    return [e for e in events if e.kind == "proc_exit" and e.proc == proc]


@pytest.mark.parametrize("wedge", [60.0, 420.0, 481.5, 550.0])
def test_its_own_collective_times_out_and_the_monitor_ends_it_after_the_dump_signal(
        wedge: float) -> None:
    events, outcome, _ = run(shipped(wedge))
    (signal,) = [e for e in events if e.kind == "nccl_dump_signal"]
    assert signal.proc == WEDGED
    timeout = NCCL.default_timeout
    timed_out = signal.get("timed_out_at")
    # the collective queued as the wedge came (or the one it was inside, queued less than
    # a step before) times out a group timeout later
    assert wedge + timeout - 0.1 <= timed_out <= wedge + timeout
    assert signal.t == pytest.approx(timed_out + NCCL.dump_delay, abs=1e-9)
    assert NCCL.dump_delay == 5.0  # 4.4-6.5 s measured on an H200
    (end,) = exits(events, WEDGED)
    assert end.get("code") == WATCHDOG_ABORT_CODE == -6
    assert "heartbeat monitor" in end.get("reason") and "SIGABRT" in end.get("reason")
    assert end.t == pytest.approx(signal.get("abort_at"), abs=1e-9)
    assert end.t == pytest.approx(signal.t + PERIOD, abs=1e-9)  # its wait after the dump
    # about pg_timeout + 5 s + 480 s after the wedge (1,085 s at torch's defaults)
    assert end.t - wedge == pytest.approx(timeout + 5.0 + 480.0, abs=0.1)
    assert outcome == "failed"


def test_the_measured_case_the_monitor_ends_it_its_timeout_after_the_signal() -> None:
    """The H200 measurement's settings (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=5, group timeout
    10 s): SIGABRT 5 s after the dump signal, which follows the timeout; the sim's run of
    the same settings ends the wedged process there, long before its peers' agents could
    act."""
    sc = shipped(420.0, pg_timeout=10.0)
    world = build_world(sc, 0)
    world = dataclasses.replace(world, collectives=dataclasses.replace(
        world.collectives, heartbeat_timeout=5.0))
    events = list(simulate(sc, 0, world=world)[0])
    (signal,) = [e for e in events if e.kind == "nccl_dump_signal"]
    assert 430.0 - 0.1 <= signal.get("timed_out_at") <= 430.0
    (end,) = exits(events, WEDGED)
    assert end.t == pytest.approx(signal.get("timed_out_at") + NCCL.dump_delay + 5.0,
                                  abs=1e-9)


def test_the_peers_time_out_and_are_torn_down_while_the_wedged_worker_sees_nothing() -> None:
    sc = load_scenario(SHIPPED)
    wedge = sc.fault_objects()[0].at
    events, _, _ = run(sc)
    for peer in PEERS:
        (end,) = exits(events, peer)
        assert end.get("code") == WATCHDOG_ABORT_CODE
        assert "allreduce timed out" in end.get("reason")
        assert "NCCL watchdog tore the process down" in end.get("reason")
        assert wedge + 600.0 <= end.t < wedge + 601.0  # NCCL's default group timeout
    mine = [e for e in events if e.proc == WEDGED and e.t > sc.fault_objects()[0].at]
    # no step, no failed collective, no teardown: it is stuck until the monitor's abort
    assert [e.kind for e in mine] == ["nccl_dump_signal", "proc_exit"]
    (abort,) = exits(events, WEDGED)
    assert abort.t > max(e.t for p in PEERS for e in exits(events, p)) + 400.0
    # h0's agent, which hosts the store, waited on its stuck worker until then
    (failed,) = [e for e in events if e.kind == "job_failed" and e.proc == "h0/main"]
    assert failed.t >= abort.t and "{0: -6}" in failed.get("error")


def test_the_collective_it_is_inside_never_completes_and_its_own_watchdog_sees_nothing(
        ) -> None:
    """Wedged as it enters an allreduce: that allreduce never completes, for anyone; its
    peers' calls time out and they are torn down; its own call times out for its watchdog,
    which cannot tear it down: the monitor ends it after the dump signal."""
    raw = yaml.safe_load(SHIPPED.read_text())
    raw["faults"][0] = {"id": "wedge-h0", "type": "gpu_wedge", "host": "h0", "at": 0,
                        "when": {"event": "coll_enter", "host": "h0", "match": {"seq": 50}}}
    raw.pop("expect")
    events, outcome, _ = run(parse_scenario(raw, str(SHIPPED)))
    (fault,) = [e for e in events if e.kind == "fault"]
    assert fault.get("phase") == "start"
    entered = {e.proc for e in events if e.kind == "coll_enter" and e.get("seq") == 50}
    assert entered == {WEDGED, *PEERS}
    assert not [e for e in events if e.kind == "coll_done" and e.get("seq", 0) >= 50]
    assert {e.proc for e in events if e.kind == "coll_fail"} == set(PEERS)
    (signal,) = [e for e in events if e.kind == "nccl_dump_signal"]
    (enter,) = [e for e in events if e.kind == "coll_enter" and e.get("seq") == 50
                and e.proc == WEDGED]
    assert signal.get("timed_out_at") == pytest.approx(enter.t + NCCL.default_timeout,
                                                       abs=1e-9)
    (end,) = exits(events, WEDGED)
    assert "heartbeat monitor" in end.get("reason")
    assert end.t == pytest.approx(enter.t + NCCL.default_timeout + NCCL.dump_delay + PERIOD,
                                  abs=1e-9)
    assert outcome == "failed"


def test_a_wedge_of_its_main_activity_that_heals_does_not_free_a_wedged_gpu() -> None:
    raw = yaml.safe_load(SHIPPED.read_text())
    raw["faults"].insert(0, {"id": "stuck-main", "type": "wedge", "host": "h0",
                             "proc": WEDGED, "activity": "main", "at": 400, "duration": 100})
    raw.pop("expect")
    events, _, _ = run(parse_scenario(raw, str(SHIPPED)))
    assert [(e.get("id"), e.get("phase")) for e in events if e.kind == "fault"] == [
        ("stuck-main", "start"), ("wedge-h0", "start"), ("stuck-main", "heal")]
    assert not [e for e in events if e.proc == WEDGED and e.t > 400
                and e.kind in ("step", "train_steps", "coll_enter")]
    (end,) = exits(events, WEDGED)
    assert "heartbeat monitor" in end.get("reason")


def test_with_monitoring_off_the_monitor_only_logs_and_the_job_hangs() -> None:
    events, outcome, hung = run(load_scenario(SHIPPED), monitoring=False)
    (signal,) = [e for e in events if e.kind == "nccl_dump_signal"]
    assert signal.get("abort_at") is None
    assert exits(events, WEDGED) == []  # never aborted: alive at the time limit
    assert hung and outcome == "hung"
    assert not next(c for c in run_checks(events) if c.name == "terminates").ok


def test_with_restarts_left_the_agent_stops_the_wedged_worker_before_the_monitor_can() -> None:
    """The peers' agents re-rendezvous after the timeout; h0's agent sees them waiting and
    stops its workers (SIGTERM ends the stuck process): the monitor never aborts it, nor
    the worker started after it."""
    events, outcome, _ = run(shipped(max_restarts=3))
    first, *later = exits(events, WEDGED)
    assert first.get("code") == -15
    # stopped before its collective's timeout: no dump signal, no abort
    assert not [e for e in events if e.kind == "nccl_dump_signal"]
    assert not [e for e in events if e.kind == "proc_exit"
                and "heartbeat monitor" in str(e.get("reason"))]
    assert [e.get("code") for e in later] == [0]  # a new process, on a GPU that works
    assert outcome == "completed"


def test_a_gpu_wedge_before_any_group_on_gpus_is_skipped_saying_why() -> None:
    events, _, _ = run(shipped(0.5))
    (fault,) = [e for e in events if e.kind == "fault"]
    assert fault.get("phase") == "skipped"
    assert "no process of h0 has a process group on GPUs" in fault.get("reason")
    assert not [e for e in events if e.kind == "nccl_dump_signal"]


def test_a_gpu_wedge_on_a_cluster_on_cpus_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SHIPPED.read_text()
    assert "\n  device: cuda\n" in text
    line = refused(tmp_path, capsys, text.replace("\n  device: cuda\n", "\n  device: cpu\n"))
    assert "faults[0].type" in line
    assert "a gpu_wedge fault needs cluster.device: cuda, got cpu" in line


def test_a_gpu_wedge_of_another_hosts_process_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SHIPPED.read_text().replace("host: h0, at: 420", "host: h0, proc: h1/w0, at: 420")
    line = refused(tmp_path, capsys, text)
    assert "faults[0].proc" in line and "expected a process of h0" in line


@pytest.mark.parametrize("mode", ["real", "torchrun"])
def test_real_and_torchrun_mode_refuse_a_gpu_wedge_before_starting_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    out = tmp_path / "out"
    rc = main(["run", str(SHIPPED), "--mode", mode, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{SHIPPED}: faults[0]: fault 'wedge-h0' (gpu_wedge):" in err
    assert "GPU" in err and "--mode sim" in err
    assert not (out / "trace.jsonl").exists()
