"""The torchelastic scenarios, run in the simulator, do what upstream (torch 2.13) does:
who is in each round with which rank, which restarts are spent, which exits close the
rendezvous, and how the job ends when it cannot go on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main

ROOT = Path(__file__).resolve().parents[3]
DIR = ROOT / "scenarios" / "torchelastic"
SCENARIOS = sorted(p.name for p in DIR.glob("*.yaml"))


def run(tmp_path: Path, name: str, *extra: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    out = tmp_path / name.removesuffix(".yaml")
    rc = main(["run", str(DIR / name), "--out", str(out), "--quiet", "--no-report", *extra])
    summary = json.loads((out / "summary.json").read_text())
    events = [json.loads(line) for line in (out / "trace.jsonl").open()]
    return rc, summary, events


def membership(summary: dict[str, Any]) -> list[tuple[int, list[str], dict[str, int]]]:
    """(round, members, ranks) of every formed round: what sim and real must agree on."""
    return [(r["round"], r["members"], r["ranks"]) for r in summary["metrics"]["rounds"]]


def of(events: list[dict[str, Any]], kind: str, proc: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind and (proc is None or e["proc"] == proc)]


def test_every_upstream_path_has_a_scenario() -> None:
    assert {"scale_down.yaml", "scale_up.yaml", "worker_crash.yaml", "store_host_crash.yaml",
            "rank0_host_crash.yaml", "hot_spare.yaml", "clock_skew.yaml",
            "partition_heals.yaml"} <= set(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_meets_its_expectations_in_sim(tmp_path: Path, name: str) -> None:
    rc, summary, _ = run(tmp_path, name)
    unmet = [e for e in summary["expectations"] if not e["ok"]]
    assert (rc, summary["verdict"], unmet) == (0, "pass", [])


def test_scale_down_membership_and_one_restart_per_survivor(tmp_path: Path) -> None:
    _, s, ev = run(tmp_path, "scale_down.yaml")
    assert membership(s) == [
        (0, ["h0", "h1", "h2"], {"h0": 0, "h1": 1, "h2": 2}),
        (1, ["h0", "h1"], {"h0": 0, "h1": 1}),
    ]
    for host in ("h0", "h1"):
        restarts = of(ev, "agent_restart", f"{host}/main")
        assert [(r["data"]["reason"], r["data"]["remaining_restarts"]) for r in restarts] == [
            ("FAILED", 2)]
        started = of(ev, "workers_started", f"{host}/main")
        assert [w["data"]["restart_count"] for w in started] == [0, 1]
    # Round 1 cannot form before h2's heartbeat expires (1 s x 3) after the crash at 9.05 s.
    formed = s["metrics"]["rounds"][1]["formed_at"]
    assert formed >= 9.05 + 3 - 1  # its last heartbeat was at most one interval before
    assert s["exit_codes"] == {"h0/main": 0, "h0/w0": 0, "h1/main": 0, "h1/w0": 0,
                               "h2/main": -9, "h2/w0": -9}


def test_worker_crash_keeps_membership_and_spends_the_failed_agents_restart(
    tmp_path: Path,
) -> None:
    _, s, ev = run(tmp_path, "worker_crash.yaml")
    assert membership(s) == [
        (0, ["h0", "h1"], {"h0": 0, "h1": 1}),
        (1, ["h0", "h1"], {"h0": 0, "h1": 1}),
    ]
    (r,) = of(ev, "agent_restart", "h1/main")
    assert (r["data"]["reason"], r["data"]["remaining_restarts"]) == ("FAILED", 2)
    assert s["exit_codes"]["h1/main"] == 0  # the agent lived on
    # The restarted workers resume from the last checkpoint, not from scratch.
    restores = of(ev, "restore")
    assert restores and all(e["data"]["step"] > 0 for e in restores)


def test_scale_up_restart_for_waiting_nodes_is_free(tmp_path: Path) -> None:
    _, s, ev = run(tmp_path, "scale_up_no_shared_store.yaml")
    assert membership(s) == [
        (0, ["h0", "h1"], {"h0": 0, "h1": 1}),
        (1, ["h0", "h1", "h2"], {"h0": 0, "h1": 1, "h2": 2}),
    ]
    free = [e for e in of(ev, "agent_restart") if e["data"]["reason"] == "nodes_waiting"]
    assert free and all(e["data"]["remaining_restarts"] == 3 for e in free)


def test_scale_up_with_the_shared_store_fails_the_newcomer_on_missing_master_addr(
    tmp_path: Path,
) -> None:
    _, s, ev = run(tmp_path, "scale_up.yaml")
    assert [r["world_size"] for r in s["metrics"]["rounds"]] == [2, 3]
    failed = {e["host"]: e["data"]["error"] for e in of(ev, "job_failed")}
    assert "MASTER_ADDR" in failed["h2"]  # h0 (rank 0, cached) never published round 1's
    assert set(failed) == {"h0", "h1", "h2"}
    # Every agent's launch_agent closes the rendezvous on the way out (or tries to).
    assert {e["host"] for e in of(ev, "rdzv_shutdown")} == {"h0", "h1", "h2"}
    assert not of(ev, "workers_started", "h2/main")


def test_store_host_crash_fails_every_survivor_with_a_connection_error(tmp_path: Path) -> None:
    _, s, ev = run(tmp_path, "store_host_crash.yaml")
    for host in ("h1", "h2"):
        (failed,) = of(ev, "job_failed", f"{host}/main")
        assert failed["data"]["error"].startswith("RendezvousConnectionError")
        assert 9.05 <= failed["t"] <= 9.05 + 2
        (shutdown,) = of(ev, "rdzv_shutdown", f"{host}/main")
        assert shutdown["data"]["closed"] is False  # nothing left to close it in
        assert s["exit_codes"][f"{host}/main"] == 1
    assert len(s["metrics"]["rounds"]) == 1  # never resumes


def test_rank0_host_crash_leaves_a_survivor_with_the_dead_hosts_master_addr(
    tmp_path: Path,
) -> None:
    _, s, ev = run(tmp_path, "rank0_host_crash.yaml")
    masters = {e["host"]: e["data"]["master"] for e in of(ev, "rdzv_done")
               if e["data"]["round"] == 1}
    assert masters["h1"].startswith("h1:")  # the new rank 0 hosts a new agent store
    assert masters["h2"].startswith("h0:")  # cached from round 0: a dead host
    assert s["metrics"]["outcome"] == "failed"


def test_hot_spare_never_joins_and_never_causes_a_restart(tmp_path: Path) -> None:
    _, s, ev = run(tmp_path, "hot_spare.yaml")
    assert membership(s) == [(0, ["h0", "h1"], {"h0": 0, "h1": 1})]
    assert not of(ev, "agent_restart")
    assert not of(ev, "rdzv_done", "h2/main")
    assert s["exit_codes"]["h2/main"] == 1  # upstream's spare does not exit cleanly


def test_clock_skew_gives_the_skewed_agent_a_different_world_size(tmp_path: Path) -> None:
    _, s, ev = run(tmp_path, "clock_skew.yaml")
    sizes = {e["host"]: e["data"]["world_size"] for e in of(ev, "rdzv_done")}
    assert sizes == {"h0": 3, "h1": 3, "h2": 1}
    failed = sorted(c["name"] for c in s["checks"] if not c["ok"])
    # limits: h2 alone; clean_shutdown: the split round's exit barrier never trips
    assert failed == ["clean_shutdown", "limits", "membership_agreement", "rank_validity"]
    assert s["metrics"]["outcome"] == "completed"


def test_partition_heals_without_a_restart_and_is_refused_in_real_mode_without_a_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, s, ev = run(tmp_path, "partition_heals.yaml")
    assert not of(ev, "agent_restart")
    assert membership(s) == [(0, ["h0", "h1", "h2"], {"h0": 0, "h1": 1, "h2": 2})]
    monkeypatch.setenv("PATH", str(tmp_path))  # no ip, no nft (real mode: see tests/real)
    rc = main(["run", str(DIR / "partition_heals.yaml"), "--mode", "real",
               "--out", str(tmp_path / "real"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "faults[0]" in err and "partition" in err


def test_same_seed_gives_a_byte_identical_trace(tmp_path: Path) -> None:
    _, s1, _ = run(tmp_path / "a", "scale_down.yaml", "--seed", "3")
    _, s2, _ = run(tmp_path / "b", "scale_down.yaml", "--seed", "3")
    assert s1["trace"]["sha256"] == s2["trace"]["sha256"]
