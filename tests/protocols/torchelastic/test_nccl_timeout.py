"""torchrun's workers leave the process group's timeout to torch unless ``pg_timeout`` is
set, and torch 2.13 picks it by backend: NCCL's 10 min on ``cluster.device: cuda``, Gloo's
30 min on ``cpu`` (:mod:`elastic_sim.world`). The value is settled once, where the world is
built, and the trace's ``run_start`` records it, so the checks' bounds follow it. On NCCL,
torchrun's TORCH_NCCL_ASYNC_ERROR_HANDLING=1 has the watchdog tear a worker down (SIGABRT)
when its collective times out, where Gloo raises the timeout in the worker (exit 1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.checks.facts import knobs_of, limits_of
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, build_world, load_scenario, parse_scenario
from elastic_sim.trace import TraceEvent
from elastic_sim.world import GLOO, NCCL, WATCHDOG_ABORT_CODE, collective_model

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "scenarios" / "torchelastic" / "nccl_default_timeout.yaml"
STATIC = ROOT / "scenarios" / "scale_down.yaml"
OFF_AT = 5.0


def scenario(device: str, **knobs: Any) -> Scenario:
    """3 hosts, --nnodes=2:3, torchrun's default timings; h2 powered off mid-training."""
    return parse_scenario({
        "name": f"nccl_{device}", "seed": 0, "time_limit": 4000,
        "protocol": {"name": "torchelastic",
                     "knobs": {"min_nodes": 2, "max_nodes": 3, "max_restarts": 3, **knobs}},
        "cluster": {"hosts": 3, "store_host": "h0", "device": device},
        "workload": {"steps": 200, "step_time": 0.1, "commit_every": 10,
                     "state_bytes": 65536},
        "faults": [{"id": "off-h2", "type": "power_off", "host": "h2", "at": OFF_AT}],
    }, f"<{device}>")


def survivors_ended(events: list[TraceEvent]) -> list[tuple[float, int, str]]:
    """When and how the survivors' first workers ended: (time, exit code, reason)."""
    return [(e.t, int(e.get("code")), str(e.get("reason"))) for e in events
            if e.kind == "proc_exit" and e.proc in ("h0/w0", "h1/w0") and e.get("code") != 0]


def survivors_timed_out(events: list[TraceEvent]) -> list[float]:
    """When the survivors' workers ended on their collective's timeout."""
    return [t for t, _, why in survivors_ended(events) if "allreduce timed out" in why]


def run(sc: Scenario) -> tuple[list[TraceEvent], dict[str, Any]]:
    events, _, _ = simulate(sc, 0)
    return list(events), dict(knobs_of(events))


def test_the_backends_default_timeouts_are_torchs() -> None:
    assert (GLOO.default_timeout, NCCL.default_timeout) == (1800.0, 600.0)
    assert collective_model("cuda") is NCCL and collective_model("cpu") is GLOO


def test_a_cuda_group_without_pg_timeout_times_out_at_nccls_ten_minutes() -> None:
    sc = scenario("cuda")
    assert sc.knobs()["pg_timeout"] == 600.0
    assert build_world(sc, 0).args["knobs"]["pg_timeout"] == 600.0
    events, recorded = run(sc)
    assert recorded["pg_timeout"] == 600.0  # run_start records the settled value
    times = survivors_timed_out(events)
    assert len(times) == 2
    # the workers entered their allreduce with h2 within a step of the power-off
    assert all(OFF_AT + 600.0 <= t < OFF_AT + 601.0 for t in times), times
    limits = limits_of(recorded, "torchelastic")
    assert limits is not None
    assert limits.progress_s == 600.0 + 30.0 + 600.0  # pg_timeout + stop + join_timeout
    assert "max(pg_timeout 600 s," in limits.progress_by


def test_an_explicit_pg_timeout_wins_over_the_backends_default() -> None:
    sc = scenario("cuda", pg_timeout=90)
    events, recorded = run(sc)
    assert recorded["pg_timeout"] == 90.0
    times = survivors_timed_out(events)
    assert len(times) == 2 and all(OFF_AT + 90.0 <= t < OFF_AT + 91.0 for t in times), times
    limits = limits_of(recorded, "torchelastic")
    assert limits is not None and "max(pg_timeout 90 s," in limits.progress_by
    # an explicit 30 min on GPUs too
    assert scenario("cuda", pg_timeout=1800).knobs()["pg_timeout"] == 1800.0


def test_a_cpu_group_keeps_gloos_thirty_minutes() -> None:
    sc = scenario("cpu")
    assert sc.knobs()["pg_timeout"] == 1800.0
    _, recorded = run(sc)
    assert recorded["pg_timeout"] == 1800.0
    limits = limits_of(recorded, "torchelastic")
    assert limits is not None and limits.progress_s == 1800.0 + 30.0 + 600.0


def test_a_null_pg_timeout_is_the_backends_default() -> None:
    assert scenario("cuda", pg_timeout=None).knobs()["pg_timeout"] == 600.0
    assert scenario("cpu", pg_timeout=None).knobs()["pg_timeout"] == 1800.0


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_world_built_without_the_knob_takes_the_runtimes_default(device: str) -> None:
    """A world built by hand, knobs without ``pg_timeout``: the worker asks its runtime for
    its groups' default, as torch's ``init_process_group`` does without a timeout."""
    sc = scenario(device)
    world = build_world(sc, 0)
    knobs = {k: v for k, v in world.args["knobs"].items() if k != "pg_timeout"}
    world = dataclasses.replace(world, args={**world.args, "knobs": knobs})
    events, _, _ = simulate(sc, 0, world=world)
    times = survivors_timed_out(list(events))
    expected = collective_model(device).default_timeout
    assert len(times) == 2
    assert all(OFF_AT + expected <= t < OFF_AT + expected + 1.0 for t in times), times


def test_the_shipped_scenario_recovers_within_nccls_default() -> None:
    sc = load_scenario(SHIPPED)
    assert sc.cluster.device == "cuda" and "pg_timeout" not in sc.protocol.knobs
    events, metrics, _ = simulate(sc, sc.seed)
    (rec,) = metrics.recoveries
    assert 600.0 <= rec.phases()["detect"] < 602.0
    assert knobs_of(events)["pg_timeout"] == 600.0


def test_nccls_watchdog_tears_a_torchrun_worker_down_at_the_timeout() -> None:
    events, _ = run(scenario("cuda"))
    ended = survivors_ended(events)
    assert len(ended) == 2
    for _, code, why in ended:
        assert code == WATCHDOG_ABORT_CODE == -6  # SIGABRT, not the script's exit 1
        assert "allreduce timed out" in why
        assert "NCCL watchdog tore the process down" in why
        assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in why
    # the agents see the failed workers and re-form without h2
    rounds = [e.get("members") for e in events if e.kind == "rdzv_complete"]
    assert rounds[-1] == ["h0", "h1"]


def test_gloo_raises_the_timeout_in_the_worker() -> None:
    events, _ = run(scenario("cpu"))
    ended = survivors_ended(events)
    assert len(ended) == 2
    assert all(code == 1 and why.startswith("CollectiveTimeout: ") for _, code, why in ended)


def test_a_process_without_torchruns_variable_sees_the_nccl_error_raised(
        tmp_path: Path) -> None:
    """The static protocol's workers do not carry TORCH_NCCL_ASYNC_ERROR_HANDLING: on NCCL
    they see the failure at the group's timeout and recover in the same process."""
    path = tmp_path / "static_cuda.yaml"
    path.write_text(STATIC.read_text().replace("cluster:", "cluster:\n  device: cuda", 1))
    sc = load_scenario(path)
    events, metrics, _ = simulate(sc, sc.seed)
    assert not [e for e in events if e.kind == "proc_exit"
                and e.get("code") == WATCHDOG_ABORT_CODE]
    (rec,) = metrics.recoveries
    assert rec.phases()["detect"] == pytest.approx(30.0, abs=0.01)  # its group_timeout


@pytest.mark.parametrize(("mode", "code"), [("0", 1), ("1", -6), ("2", 1), ("3", -6)])
def test_the_error_handling_mode_decides_the_teardown(
        monkeypatch: pytest.MonkeyPatch, mode: str, code: int) -> None:
    """torch's ErrorHandlingMode: 1 (TearDown) and 3 (SkipCleanUp) take the process down;
    0 (NoHandling) and 2 (CleanUpOnly) leave the error to the caller (here: exit 1)."""
    from elastic_sim.protocols.torchelastic import agent

    upstream = agent.worker_env

    def with_mode(*args: Any, **kwargs: Any) -> dict[str, str]:
        return {**upstream(*args, **kwargs), "TORCH_NCCL_ASYNC_ERROR_HANDLING": mode}

    monkeypatch.setattr(agent, "worker_env", with_mode)
    ended = survivors_ended(run(scenario("cuda"))[0])
    assert len(ended) == 2 and {c for _, c, _ in ended} == {code}, ended
