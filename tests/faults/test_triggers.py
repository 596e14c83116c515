"""Faults fire at a time, at a training step or epoch, when a trace event happens, from a
failure-rate model, or replayed from a failure trace; every run says what fired and why
not."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.faults.model import CrashHost, CrashRestart
from elastic_sim.faults.triggers import FailureModel, TraceFileError, parse_failure_trace
from tests.faults.util import run


def test_at_step_fires_right_after_the_first_step_event_with_that_number(
    tmp_path: Path,
) -> None:
    out = run(tmp_path, [{"id": "c", "type": "crash", "host": "h3", "at_step": 25}])
    step25 = min(e.t for e in out.of("step") if e.get("step") == 25)
    (start,) = [e for e in out.of("fault") if e.get("phase") == "start"]
    assert start.t == step25 and start.get("trigger") == "step{step=25}"
    assert out.faults["c"].fired and out.faults["c"].at == step25
    # h3 died right after step 25: the survivors lose the steps since the commit at 20.
    assert out.report.metrics.world_sizes == [4, 3]


def test_when_a_host_enters_a_rendezvous_round(tmp_path: Path) -> None:
    # h1 crashes at 2 s; when h2 then joins round 1, h0 hangs for a second.
    out = run(tmp_path, [
        {"id": "c", "type": "crash", "host": "h1", "at": 2.0},
        {"id": "h", "type": "hang", "host": "h0", "duration": 1.0,
         "when": {"event": "rdzv_join", "host": "h2", "match": {"round": 1}}},
    ])
    join = next(e for e in out.of("rdzv_join", "h2") if e.get("round") == 1)
    assert out.phases("h") == [("start", join.t), ("heal", join.t + 1.0)]


def test_at_epoch_fires_when_that_round_completes(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "c1", "type": "crash", "host": "h3", "at": 2.0},
                         {"id": "c2", "type": "crash", "host": "h2", "at_epoch": 1}])
    done1 = min(e.t for e in out.of("rdzv_done") if e.get("round") == 1)
    assert out.faults["c2"].at == done1
    assert out.report.metrics.world_sizes == [4, 3, 2]


def test_a_trigger_that_never_happens_is_reported_with_the_reason(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "c", "type": "crash", "host": "h3", "at_step": 10_000}])
    rep = out.faults["c"]
    assert not rep.fired and rep.reason == "its trigger step{step=10000} never happened"


def test_a_trigger_is_watched_only_from_its_at(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "c", "type": "crash", "host": "h3", "at": 3.0,
                          "when": {"event": "step"}}])
    assert out.faults["c"].at is not None and out.faults["c"].at >= 3.0


def test_failure_model_is_a_pure_function_of_its_seed() -> None:
    model = FailureModel(mtbf=50.0, hosts=("h0", "h1", "h2"), until=500.0, downtime=5.0,
                         seed=1)
    a, b = model.expand(), model.expand()
    assert a == b and a and all(isinstance(f, CrashRestart) for f in a)
    assert [f.at for f in a] == sorted(f.at for f in a)
    assert FailureModel(50.0, ("h0", "h1", "h2"), 500.0, downtime=5.0, seed=2).expand() != a
    # Weibull with the same mean: about as many failures per host over a long horizon.
    n = len(FailureModel(10.0, ("h0",), 10_000.0, shape=1.5, downtime=0.0).expand())
    assert 800 <= n <= 1200


def test_mtbf_failures_fire_in_a_run(tmp_path: Path) -> None:
    out = run(tmp_path, [{"id": "m", "type": "mtbf", "mtbf": 4.0, "hosts": ["h2", "h3"],
                          "until": 5.0, "downtime": 1.0, "seed": 3}])
    ids = sorted(out.faults)
    assert ids and all(i.startswith("m-h") for i in ids)
    assert all(out.faults[i].type == "crash_restart" for i in ids)
    assert any(out.faults[i].fired for i in ids)


def test_replayed_failure_trace_from_csv_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "failures.csv").write_text("time,host,downtime\n2.5,h3,\n4.0,h2,1.5\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "protocol: {name: static, knobs: {min_hosts: 2, max_hosts: 4}}\n"
        "cluster: {hosts: 4}\nworkload: {steps: 60, step_time: 0.1}\n"
        "faults:\n  - {id: r, type: replay, file: failures.csv}\n")
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--quiet", "--no-report"]) == 0
    import json

    faults = json.loads((out / "summary.json").read_text())["faults"]
    assert [(f["id"], f["type"], f["fired"], f["at"]) for f in faults] == [
        ("r-0", "crash", True, 2.5), ("r-1", "crash_restart", True, 4.0)]


def test_replayed_failure_trace_from_json() -> None:
    got = parse_failure_trace('[{"time": 1, "host": "h1"}]', "json", ["h0", "h1"])
    assert got == [CrashHost("replay-0", 1.0, "h1")]


@pytest.mark.parametrize("text,fmt,where", [
    ("time,host\nsoon,h1\n", "csv", "line 2.time"),
    ("time,host\n1.0,h9\n", "csv", "line 2.host"),
    ('[{"time": -1, "host": "h1"}]', "json", "row 1.time"),
    ('{"time": 1}', "json", "top level"),
])
def test_a_bad_failure_trace_names_the_row_and_column(text: str, fmt: str, where: str) -> None:
    with pytest.raises(TraceFileError) as exc:
        parse_failure_trace(text, fmt, ["h0", "h1"])  # type: ignore[arg-type]
    assert exc.value.where == where
