"""Per-host differences a scenario states on ``cluster.hosts[i]``: a slower step
(``step_factor``), fewer steps (``steps``: the host finishes early, with success) and a
slower process start (``start_delay``), honoured by the sim (and read by real mode from the
same description), refused with one exit-2 message when malformed."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.cli import main
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario, workload_dict
from elastic_sim.trace import TraceEvent, encode
from tests.faults.util import BASE

TE: dict[str, Any] = {
    "name": "te_hosts",
    "time_limit": 300,
    "protocol": {"name": "torchelastic",
                 "knobs": {"min_nodes": 2, "max_nodes": 3, "max_restarts": 3,
                           "join_timeout": 20, "pg_timeout": 30, "monitor_interval": 0.1,
                           "last_call_timeout": 1, "exit_barrier_timeout": 60}},
    "cluster": {"hosts": ["h0", "h1", "h2"], "store_host": "h0"},
    "workload": {"steps": 60, "step_time": 0.1, "commit_every": 10, "state_bytes": 65536},
}


def _with_hosts(base: dict[str, Any], hosts: list[Any]) -> dict[str, Any]:
    raw = copy.deepcopy(base)
    raw["cluster"]["hosts"] = hosts
    return raw


def _run(raw: dict[str, Any], seed: int = 0) -> list[TraceEvent]:
    events, _, _ = simulate(parse_scenario(raw), seed)
    return events


def _step_times(events: list[TraceEvent], host: str) -> list[float]:
    return [e.t for e in events if e.kind == "step" and e.host == host]


def _median_gap(times: list[float]) -> float:
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    return gaps[len(gaps) // 2]


def test_the_workload_carries_each_host_s_own_steps_and_step_factor() -> None:
    sc = parse_scenario(_with_hosts(TE, ["h0", {"name": "h1", "step_factor": 3},
                                         {"name": "h2", "steps": 20}]))
    assert workload_dict(sc)["hosts"] == {"h1": {"step_factor": 3.0}, "h2": {"steps": 20}}
    assert [h.start_delay for h in sc.cluster.host_specs()] == [0.0, 0.0, 0.0]


def test_a_slower_host_stretches_every_synchronous_step_of_every_host() -> None:
    plain = _run(TE)
    slow = _run(_with_hosts(TE, ["h0", {"name": "h1", "step_factor": 3}, "h2"]))
    for host in ("h0", "h2"):  # not the slow host itself: it waits for h1 at the allreduce
        fast_gap, slow_gap = _median_gap(_step_times(plain, host)), \
            _median_gap(_step_times(slow, host))
        assert fast_gap == pytest.approx(0.1, abs=0.02), fast_gap
        assert slow_gap == pytest.approx(0.3, abs=0.02), slow_gap
    assert max(_step_times(slow, "h0")) > max(_step_times(plain, "h0")) + 0.2 * 40


def test_the_static_protocol_waits_for_its_slow_host_too() -> None:
    raw = _with_hosts(BASE, ["h0", "h1", {"name": "h2", "step_factor": 2}, "h3"])
    gap = _median_gap(_step_times(_run(raw), "h0"))
    assert gap == pytest.approx(0.2, abs=0.02)


def test_horovod_waits_for_its_slow_host_too() -> None:
    from elastic_sim.scenario import load_scenario, scenario_dict

    raw = scenario_dict(load_scenario(Path(__file__).resolve().parents[2] / "scenarios"
                                      / "horovod" / "fault_tolerance_without_scaling.yaml"))
    raw["faults"], raw["expect"] = [], {}
    hosts = raw["cluster"]["hosts"]  # [localhost, 127.0.0.1]
    plain = _step_times(_run(raw), hosts[0])[:5]
    slow = _step_times(_run(_with_hosts(raw, [hosts[0], {"name": hosts[1],
                                                         "step_factor": 3}])), hosts[0])[:5]
    assert _median_gap(plain) == pytest.approx(0.1, abs=0.01)
    assert _median_gap(slow) == pytest.approx(0.3, abs=0.01)


def test_a_host_that_finishes_early_leaves_with_success_and_the_others_cannot_go_on(
) -> None:
    """Upstream (torchelastic): the early host's worker exits 0, its agent's group is
    SUCCEEDED and it waits in the exit barrier, still a participant of the complete round.
    The others' workers fail at the allreduce with the departed peer; their agents restart
    and join again, but a complete round puts joiners on the wait list (dynamic_rendezvous
    _RendezvousJoinOp) until a participant restarts, which the finished host never does:
    after join_timeout they fail with RendezvousTimeoutError."""
    events = _run(_with_hosts(TE, ["h0", "h1", {"name": "h2", "steps": 20}]))
    def steps(host: str) -> list[int]:
        return [int(e.get("step")) for e in events if e.kind == "step" and e.host == host]
    assert max(steps("h2")) == 20 and max(steps("h0")) == 20  # no step after h2 left
    done = [e for e in events if e.kind == "proc_exit" and e.host == "h2"]
    assert {e.proc: e.get("code") for e in done} == {"h2/w0": 0, "h2/main": 0}
    left = next(e.t for e in done if e.proc == "h2/w0")
    failed = [e for e in events if e.kind == "coll_fail" and e.get("peer") == 2]
    assert {e.host for e in failed} == {"h0", "h1"} and all(e.t >= left for e in failed)
    joins = [e for e in events if e.kind == "rdzv_join" and e.get("round") == 1]
    assert {e.host for e in joins} == {"h0", "h1"}
    (err,) = [e for e in events if e.kind == "job_failed" and e.host == "h0"]
    assert "RendezvousTimeoutError" in err.get("error")
    assert err.t - min(e.t for e in joins) == pytest.approx(20, abs=0.5)  # join_timeout
    assert not [e for e in events
                if e.kind in ("rdzv_complete", "rdzv_done") and e.get("round") == 1]


def test_a_host_start_delay_delays_each_process_started_there_by_that_much() -> None:
    late = _run(_with_hosts(TE, ["h0", "h1", {"name": "h2", "start_delay": 4}]))
    joins = {e.host: e.t for e in late if e.kind == "rdzv_join" and e.get("round") == 0}
    assert max(joins["h0"], joins["h1"]) < 0.01 and joins["h2"] == pytest.approx(4.0, abs=0.01)
    # a worker, started later, pays it on top of the process start every worker pays
    plain = _run(TE)
    slow = _run(_with_hosts(TE, [{"name": h, "start_delay": 2} for h in ("h0", "h1", "h2")]))
    def boot(events: list[TraceEvent]) -> float:
        started = next(e.t for e in events if e.kind == "workers_started" and e.host == "h1")
        return next(e.t for e in events if e.kind == "group_init" and e.host == "h1") - started
    assert boot(slow) - boot(plain) == pytest.approx(2.0, abs=0.05)
    first = [min(_step_times(ev, "h1")) for ev in (plain, slow)]
    assert first[1] - first[0] == pytest.approx(4.0, abs=0.2)  # the agent's 2 s, the worker's


def test_the_trace_is_byte_identical_for_the_same_seed() -> None:
    raw = _with_hosts(TE, ["h0", {"name": "h1", "step_factor": 1.5, "start_delay": 0.5},
                           {"name": "h2", "steps": 30}])
    a, b = _run(raw, 3), _run(raw, 3)
    assert [encode(e) for e in a] == [encode(e) for e in b]


@pytest.mark.parametrize(("host", "field", "expected"), [
    ({"name": "h1", "step_factor": 0}, "cluster.hosts[1].step_factor", "greater than 0"),
    ({"name": "h1", "steps": 0}, "cluster.hosts[1].steps", "greater than or equal to 1"),
    ({"name": "h1", "steps": 61}, "cluster.hosts[1].steps", "at most workload.steps (60)"),
    ({"name": "h1", "start_delay": -1}, "cluster.hosts[1].start_delay", "greater than or"),
    ({"name": "h1", "step_time": 2}, "cluster.hosts[1].step_time", "did you mean 'step_factor'"),
])
def test_bad_host_differences_exit_2_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], host: dict[str, Any], field: str,
        expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_with_hosts(TE, ["h0", host, "h2"])))
    rc = main(["validate", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{path}: {field}" in err and expected in err, err
