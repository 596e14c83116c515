"""The elastic agent's decisions, worker rank assignment and worker environment, as pure
functions; and the launcher's epilogue (which exits close the rendezvous) observed in
simulated runs, signals included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.torchelastic.agent import (
    WorkerState,
    decide,
    monitor_state,
    worker_env,
)
from elastic_sim.protocols.torchelastic.agent_ranks import (
    AgentRanks,
    RoleInfo,
    compute_ranks,
    identical_ranks,
)
from elastic_sim.protocols.torchelastic.handler import RendezvousInfo, RendezvousStoreInfo
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs
from elastic_sim.protocols.torchelastic.state import NodeDesc
from elastic_sim.trace import TraceEvent
from elastic_sim.world import WAKE_LATENCY, HostSpec, World

# -- control-loop decisions -------------------------------------------------------------


def test_a_failed_or_unhealthy_group_restarts_while_budget_remains_then_fails() -> None:
    for state in (WorkerState.FAILED, WorkerState.UNHEALTHY):
        assert decide(state, remaining_restarts=1, nodes_waiting=0) == "restart"
        assert decide(state, remaining_restarts=0, nodes_waiting=0) == "fail"
        # waiting nodes do not matter once the local group failed
        assert decide(state, remaining_restarts=0, nodes_waiting=3) == "fail"


def test_waiting_nodes_restart_a_healthy_group_without_spending_budget() -> None:
    assert decide(WorkerState.HEALTHY, remaining_restarts=0, nodes_waiting=1) == (
        "membership_restart")
    assert decide(WorkerState.HEALTHY, remaining_restarts=0, nodes_waiting=0) == "wait"


def test_success_goes_to_the_exit_barrier_and_unknown_states_raise() -> None:
    assert decide(WorkerState.SUCCEEDED, 0, 5) == "exit_barrier"
    for state in (WorkerState.UNKNOWN, WorkerState.INIT, WorkerState.STOPPED):
        assert decide(state, 3, 0) == "raise"


def test_group_state_from_exit_codes() -> None:
    assert monitor_state([None, None]) is WorkerState.HEALTHY
    assert monitor_state([0, None]) is WorkerState.HEALTHY
    assert monitor_state([0, 0]) is WorkerState.SUCCEEDED
    assert monitor_state([None, 1]) is WorkerState.FAILED
    assert monitor_state([0, -9]) is WorkerState.FAILED


# -- rank assignment ----------------------------------------------------------------------


def test_ranks_are_prefix_sums_of_local_world_sizes_in_group_rank_order() -> None:
    infos = [RoleInfo("trainer", 0, 2), RoleInfo("ps", 1, 1), RoleInfo("trainer", 2, 3)]
    assert compute_ranks(infos) == [
        AgentRanks(0, 6, 0, 5),
        AgentRanks(2, 6, 0, 1),
        AgentRanks(3, 6, 2, 5),
    ]


def test_identical_fast_path_matches_the_store_path_for_a_homogeneous_job() -> None:
    infos = [RoleInfo("default", g, 4) for g in range(3)]
    assert compute_ranks(infos) == [identical_ranks(g, 3, 4) for g in range(3)]


def test_role_info_and_assigned_ranks_round_trip_as_json() -> None:
    info = RoleInfo("default", 3, 8)
    assert RoleInfo.deserialize(info.serialize()) == info
    ranks = AgentRanks(8, 16, 8, 16)
    assert AgentRanks.from_json(ranks.to_json()) == ranks


def test_worker_environment_is_upstreams() -> None:
    knobs = TorchElasticKnobs(min_nodes=2, max_nodes=2, nproc_per_node=2, max_restarts=3,
                              run_id="job7")
    info = RendezvousInfo(store=None, rank=1, world_size=2,  # type: ignore[arg-type]
                          bootstrap=RendezvousStoreInfo("h0", 29501), round=4,
                          members=(NodeDesc("h0", 1), NodeDesc("h1", 2)))
    env = worker_env(knobs, info, identical_ranks(1, 2, 2), local_rank=1, restart_count=2)
    assert env == {
        "LOCAL_RANK": "1", "RANK": "3", "GROUP_RANK": "1", "ROLE_RANK": "3",
        "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4",
        "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "4", "MASTER_ADDR": "h0",
        "MASTER_PORT": "29501", "TORCHELASTIC_RESTART_COUNT": "2",
        "TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_RUN_ID": "job7",
        "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "OMP_NUM_THREADS": "1",
    }


def test_knob_defaults_are_torchruns() -> None:
    k = TorchElasticKnobs()
    assert (k.max_restarts, k.monitor_interval, k.shutdown_timeout, k.stop_timeout,
            k.exit_barrier_timeout) == (0, 0.1, 30.0, 30.0, 300.0)
    s = k.rendezvous()
    assert (s.join_timeout, s.last_call_timeout, s.close_timeout, s.heartbeat_timeout,
            s.keep_alive_interval, s.keep_alive_max_attempt) == (600.0, 30.0, 30.0, 5.0, 5.0, 3)
    assert k.share_store and not k.identical_workers


# -- the launcher's epilogue, observed in the simulator ----------------------------------

LAUNCHER = "elastic_sim.protocols.torchelastic.launcher:host_main"
FAST = {"min_nodes": 1, "max_nodes": 1, "max_restarts": 0, "keep_alive_interval": 1.0,
        "heartbeat_timeout": 1.0, "last_call_timeout": 1.0, "shutdown_timeout": 2.0,
        "close_timeout": 5.0}


async def signal_parent(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Start torchrun's launcher as a child, send it a signal at ``signal_at``, record how
    it ended."""
    child = await rt.start_process("agent", LAUNCHER, args["launch"])
    await rt.sleep(float(args["signal_at"]))
    child.signal(str(args["signal"]))
    rt.record("test_agent_exit", code=await child.wait())
    return 0


def run_sim(entry: str, args: dict[str, Any], faults: tuple[Any, ...] = ()) -> list[TraceEvent]:
    from elastic_sim import sim

    events: list[TraceEvent] = []
    world = World(hosts=(HostSpec("h0"),), entry=entry, args=args, time_limit=120)
    sim.run(world, list(faults), 0, events.append)
    return events


def launch_args(**knobs: Any) -> dict[str, Any]:
    return {"hosts": ["h0"], "store_host": "h0", "knobs": {**FAST, **knobs}, "seed": 0,
            "workload": {"steps": 30, "step_time": 0.1, "commit_every": 10,
                         "state_bytes": 1024}}


def kinds(events: list[TraceEvent], proc: str) -> list[str]:
    return [e.kind for e in events if e.proc == proc]


def one(events: list[TraceEvent], kind: str) -> TraceEvent:
    (ev,) = [e for e in events if e.kind == kind]
    return ev


def test_success_closes_the_rendezvous_and_exits_0() -> None:
    events = run_sim(LAUNCHER, launch_args())
    assert one(events, "job_done").get("step") == 30
    assert one(events, "rdzv_shutdown").get("closed") is True
    assert one(events, "exit_barrier_done").proc == "h0/main"
    assert [e.get("code") for e in events if e.kind == "proc_exit"] == [0, 0]


def test_exhausted_restarts_close_the_rendezvous_and_exit_1() -> None:
    from elastic_sim.faults.model import CrashProcess

    events = run_sim(LAUNCHER, launch_args(max_restarts=1),
                     (CrashProcess("k1", 1.0, "h0/w0"), CrashProcess("k2", 2.5, "h0/w0")))
    restarts = [e for e in events if e.kind == "agent_restart"]
    assert [(e.get("reason"), e.get("remaining_restarts")) for e in restarts] == [("FAILED", 0)]
    assert "ChildFailedError" in one(events, "job_failed").get("error")
    assert one(events, "rdzv_shutdown").get("closed") is True
    assert [e.get("code") for e in events if e.kind == "proc_exit"][-1] == 1


def test_sigterm_once_workers_run_stops_them_and_leaves_the_rendezvous_open() -> None:
    events = run_sim("tests.protocols.torchelastic.test_agent:signal_parent",
                     {"launch": launch_args(), "signal_at": 2.0, "signal": "TERM"})
    assert "workers_started" in kinds(events, "h0/agent")
    assert "SignalException" in one(events, "job_failed").get("error")
    assert "rdzv_shutdown" not in kinds(events, "h0/agent")
    worker_exit = [e for e in events if e.kind == "proc_exit" and e.proc == "h0/w0"]
    assert [e.get("code") for e in worker_exit] == [-15]  # SIGTERMed by the agent
    assert one(events, "test_agent_exit").get("code") == 1


def test_sigint_before_workers_is_a_keyboard_interrupt_that_closes_the_rendezvous() -> None:
    events = run_sim("tests.protocols.torchelastic.test_agent:signal_parent",
                     {"launch": launch_args(), "signal_at": 0.05, "signal": "INT"})
    assert "workers_started" not in kinds(events, "h0/agent")
    assert one(events, "job_failed").get("error") == "KeyboardInterrupt"
    assert one(events, "rdzv_shutdown").get("closed") is True
    assert one(events, "test_agent_exit").get("code") == 130


def test_sigterm_before_workers_kills_the_agent_without_closing() -> None:
    events = run_sim("tests.protocols.torchelastic.test_agent:signal_parent",
                     {"launch": launch_args(), "signal_at": 0.05, "signal": "TERM"})
    assert "rdzv_shutdown" not in kinds(events, "h0/agent")
    assert "job_failed" not in kinds(events, "h0/agent")
    assert one(events, "test_agent_exit").get("code") == -15


@pytest.mark.parametrize("identical", [False, True])
def test_both_rank_paths_give_the_same_world(identical: bool) -> None:
    events = run_sim(LAUNCHER, launch_args(identical_workers=identical, nproc_per_node=2))
    started = one(events, "workers_started")
    assert (started.get("base_rank"), started.get("world_size")) == (0, 2)
    assert one(events, "job_done").get("step") == 30


def test_knobs_upstream_rejects_are_a_scenario_error_naming_the_knob(
    tmp_path: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    from elastic_sim.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("protocol: {name: torchelastic, knobs: {min_nodes: 3, max_nodes: 2}}\n"
                   "cluster: {hosts: 3}\n")
    assert main(["run", str(bad), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "protocol.knobs.max_nodes" in err
    assert not (tmp_path / "out" / "trace.jsonl").exists()


async def stubborn_worker(rt: Runtime, args: Mapping[str, Any]) -> int:
    """A worker that ignores SIGTERM (as a training script stuck in a collective can)."""
    rt.on_signal("TERM", lambda: rt.record("term_ignored"))
    await rt.sleep(1000.0)
    return 0


async def polite_worker(rt: Runtime, args: Mapping[str, Any]) -> int:
    """A worker with SIGTERM's default action (it dies)."""
    await rt.sleep(1000.0)
    return 0


async def stop_parent(rt: Runtime, args: Mapping[str, Any]) -> int:
    """An agent stops one polite and one stubborn worker."""
    from elastic_sim.protocols.torchelastic.agent import ElasticAgent

    agent = ElasticAgent(rt, None, TorchElasticKnobs(), {}, 0)  # type: ignore[arg-type]
    agent.procs = [
        await rt.start_process("w0", "tests.protocols.torchelastic.test_agent:stubborn_worker", {}),
        await rt.start_process("w1", "tests.protocols.torchelastic.test_agent:polite_worker", {}),
    ]
    await rt.sleep(0.5)
    start = rt.monotonic()
    await agent.close_workers(float(args["grace"]))
    rt.record("stopped", after=rt.monotonic() - start, codes=[p.poll() for p in agent.procs])
    return 0


def test_stopping_workers_is_sigterm_then_sigkill_after_the_grace() -> None:
    events = run_sim("tests.protocols.torchelastic.test_agent:stop_parent", {"grace": 3.0})
    assert [e.proc for e in events if e.kind == "term_ignored"] == ["h0/w0"]
    stopped = one(events, "stopped")
    # w1 dies of the SIGTERM at once; w0 ignores it and is SIGKILLed when the grace ends.
    assert stopped.get("codes") == [-9, -15]
    assert stopped.get("after") == pytest.approx(3.0 + WAKE_LATENCY)  # a timed wait wakes late
