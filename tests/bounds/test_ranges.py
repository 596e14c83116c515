"""Every number of a scenario has a type and a range that means something: bad values exit
2 with one message naming the file, the field path and what was expected, before anything
runs or is written; values upstream accepts stay accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.errors import ScenarioError
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCALE_DOWN = ROOT / "scenarios" / "scale_down.yaml"
TE_WORKER = ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml"
HVD_SINGLE = ROOT / "scenarios" / "horovod" / "single_rank_failure.yaml"


def _edit(src: Path, old: str, new: str) -> str:
    text = src.read_text()
    assert old in text, old
    return text.replace(old, new, 1)


# (name, source, old, new, field path, words of the expectation)
ISSUE_INPUTS = [
    ("last_call_nan", SCALE_DOWN, "last_call: 1.0", "last_call: .nan",
     "protocol.knobs.last_call", "finite number"),
    ("nproc_per_node_huge", TE_WORKER, "max_restarts: 3",
     "max_restarts: 3\n    nproc_per_node: 1000000000000000000",
     "protocol.knobs.nproc_per_node", "MAX_PROCS_PER_HOST"),
    ("discovery_period_zero", HVD_SINGLE, "discovery_period: 0.01", "discovery_period: 0",
     "protocol.knobs.discovery_period", "greater than 0"),
    ("keepalive_time_zero", HVD_SINGLE, "discovery_period: 0.01",
     "discovery_period: 0.01\n    keepalive_time: 0",
     "protocol.knobs.keepalive_time", "greater than or equal to 1"),
    ("latency_inf", SCALE_DOWN, "latency: 0.00005", "latency: .inf",
     "cluster.latency", "finite number"),
    ("time_limit_inf", SCALE_DOWN, "time_limit: 600", "time_limit: .inf",
     "time_limit", "finite number"),
    ("step_time_minus_inf", SCALE_DOWN, "step_time: 0.1", "step_time: -.inf",
     "workload.step_time", "finite number"),
    ("recovery_nan", SCALE_DOWN, "max_recovery_s: 5", "max_recovery_s: .nan",
     "expect.max_recovery_s", "finite number"),
    ("group_timeout_inf", SCALE_DOWN, "group_timeout: 30", "group_timeout: .inf",
     "protocol.knobs.group_timeout", "finite number"),
    ("monitor_interval_zero", TE_WORKER, "monitor_interval: 0.1", "monitor_interval: 0",
     "protocol.knobs.monitor_interval", "greater than 0"),
    ("keep_alive_interval_nan", TE_WORKER, "keep_alive_interval: 1",
     "keep_alive_interval: .nan", "protocol.knobs.keep_alive_interval", "finite number"),
    ("state_bytes_huge", SCALE_DOWN, "state_bytes: 1048576", "state_bytes: 1099511627776",
     "workload.state_bytes", "MAX_STATE_BYTES"),
    ("hosts_huge", SCALE_DOWN, "hosts: 4 ", "hosts: 1000000 ", "cluster.hosts", "MAX_HOSTS"),
    ("slots_huge", HVD_SINGLE, "hosts: ['localhost:2', '127.0.0.1:2']",
     "hosts: ['localhost:2', '127.0.0.1:99999999']",
     "protocol.knobs.discovery.schedule[0].hosts[1]", "MAX_PROCS_PER_HOST"),
    ("slots_not_a_number", HVD_SINGLE, "hosts: ['localhost:2', '127.0.0.1:2']",
     "hosts: ['localhost:2', '127.0.0.1:two']",
     "protocol.knobs.discovery.schedule[0].hosts[1]", "slots an integer"),
    ("cooldown_nan", HVD_SINGLE, "np: 2", "np: 2\n    cooldown_range: [1, .nan]",
     "protocol.knobs.cooldown_range[1]", "finite number"),
    ("min_np_above_max", HVD_SINGLE, "min_np: 2", "min_np: 5",
     "protocol.knobs.min_np", "must be <= max_np"),
]


@pytest.mark.parametrize("name,src,old,new,path,words", ISSUE_INPUTS,
                         ids=[c[0] for c in ISSUE_INPUTS])
def test_an_out_of_range_number_exits_2_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, src: Path, old: str,
        new: str, path: str, words: str) -> None:
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(_edit(src, old, new))
    out = tmp_path / "out"
    rc = main(["run", str(scenario), "--out", str(out), "--no-report"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {scenario}: {path}: "), lines[0]
    assert words in lines[0]
    assert "Traceback" not in err and not out.exists()


def test_a_world_past_the_process_limit_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "big.yaml"
    scenario.write_text(_edit(TE_WORKER, "hosts: 2 ", "hosts: 2000 ").replace(
        "max_restarts: 3", "max_restarts: 3\n    nproc_per_node: 1000"))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(scenario)
    assert exc.value.path == "protocol.knobs.nproc_per_node"
    assert "MAX_PROCS" in str(exc.value) and "2000000" in str(exc.value)


def test_random_discovery_bounds_are_checked(tmp_path: Path) -> None:
    scenario = tmp_path / "r.yaml"
    src = ROOT / "scenarios" / "horovod" / "ray_random_discovery.yaml"
    scenario.write_text(_edit(src, "min_hosts: 2, max_hosts: 4", "min_hosts: 3, max_hosts: 2"))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(scenario)
    assert exc.value.path == "protocol.knobs.discovery.random"


@pytest.mark.parametrize("src,old,new", [
    # values upstream accepts and a user may want: the smallest legal ones
    (TE_WORKER, "max_restarts: 3", "max_restarts: 0\n    nproc_per_node: 1024"),
    (TE_WORKER, "shutdown_timeout: 5", "shutdown_timeout: 0"),
    (TE_WORKER, "monitor_interval: 0.1", "monitor_interval: 0.001"),
    (TE_WORKER, "keep_alive_max_attempt: 3", "keep_alive_max_attempt: 0"),
    (HVD_SINGLE, "discovery_period: 0.01", "discovery_period: 0.001\n    keepalive_time: 1"),
    (HVD_SINGLE, "np: 2", "np: 2\n    discovery_wait: -1\n    keepalive_probes: 127"),
    (SCALE_DOWN, "last_call: 1.0", "last_call: 0"),
    (SCALE_DOWN, "hosts: 4 ", "hosts: [h0, {name: h1, clock_drift: -0.5}, h2, h3] "),
    (SCALE_DOWN, "latency: 0.00005", "latency: 0"),
])
def test_the_edges_of_the_ranges_are_accepted(tmp_path: Path, src: Path, old: str,
                                               new: str) -> None:
    scenario = tmp_path / "edge.yaml"
    scenario.write_text(_edit(src, old, new))
    load_scenario(scenario)


def test_a_clock_that_stops_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "c.yaml"
    scenario.write_text(_edit(SCALE_DOWN, "hosts: 4 ", "hosts: [h0, {name: h1, "
                                                        "clock_drift: -1}, h2, h3] "))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(scenario)
    assert re.fullmatch(r"cluster\.hosts\[1\]\.clock_drift", exc.value.path)


def test_a_scenario_error_crosses_a_process_boundary_whole() -> None:
    """explore and study workers raise it in a child process: the parent must get it back
    with its file, field and message (not a pickling error that kills the pool)."""
    import pickle

    err = ScenarioError("s.yaml", "faults[0].at", "expected a time >= 0, got -1")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, ScenarioError)
    assert (back.file, back.path, back.message, str(back)) == (
        err.file, err.path, err.message, "s.yaml: faults[0].at: expected a time >= 0, got -1")
    from elastic_sim.study.failures import FailureLogError
    from elastic_sim.trace import RecordError

    for other in (RecordError("trace.jsonl", "line 3", "not JSON"),
                  FailureLogError("line 2, column 1", "a time is expected")):
        again = pickle.loads(pickle.dumps(other))
        assert type(again) is type(other) and str(again) == str(other)
