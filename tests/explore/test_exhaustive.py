"""Exhaustive small worlds: every ordering of the decisions that matter and every single
fault at each point, over the protocols' pure decision functions; every violating path is
replayed through the full simulation."""

from __future__ import annotations

import json
from pathlib import Path

from elastic_sim.cli import main
from elastic_sim.exhaustive import enumerate_world
from elastic_sim.exhaustive.horovod import DriverWorld
from elastic_sim.exhaustive.replay import replays, world_for
from elastic_sim.exhaustive.torchelastic import RendezvousWorld
from elastic_sim.faults.model import CrashHost
from elastic_sim.pipeline import simulate
from elastic_sim.testing import load

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_a_rendezvous_without_faults_keeps_every_promise() -> None:
    world = RendezvousWorld(("h0", "h1", "h2"), 2, 3, store="h2", max_faults=0)
    found = enumerate_world(world, depth=24)
    assert found.states > 100 and not found.truncated
    assert found.paths == []


def test_a_participant_dying_in_a_forming_round_is_found_with_the_shortest_path() -> None:
    world = RendezvousWorld(("h0", "h1", "h2"), 2, 3, store="h2")
    found = enumerate_world(world, depth=24)
    dead = [p for p in found.paths if p.broken.check == "members_alive_at_completion"]
    assert dead and [m.label for m in dead[0].faults] == ["crash h0"]
    assert dead[0].describe().startswith("start h0 > step h0 > crash h0")
    assert {p.broken.check for p in found.paths} >= {"rank_validity", "membership_agreement"}
    assert all(m.actor != "h2" for p in found.paths for m in p.faults)  # the store's host


def test_the_driver_world_finds_the_first_discovery_error_and_the_skipped_sync() -> None:
    world = DriverWorld({"h0": 2, "h1": 2, "h2": 2}, "h2", 4, 2, 4, None)
    found = enumerate_world(world, depth=40)
    checks = {p.broken.check: p for p in found.paths}
    assert [m.label for m in checks["avoidable_job_failure"].faults] == ["discovery_error"]
    assert checks["collective_sequence"].faults[0].label.startswith("remove ")


def test_a_violating_path_becomes_the_scenario_s_fault_around_its_decisions() -> None:
    sc = load(SCENARIOS / "campaign" / "te_upstream_4_agents.yaml")
    world = world_for(sc)
    assert isinstance(world, RendezvousWorld) and world.store == "h3"
    found = enumerate_world(world, depth=12)
    events, _, run = simulate(sc, sc.seed)
    reps = replays(world, found.paths, sc, list(events), run.end_time)
    crash = next(r for r in reps if r.path.faults and r.path.faults[0].label == "crash h0")
    faults = [c.faults[0] for c in crash.cases]
    assert all(isinstance(f, CrashHost) and f.host == "h0" for f in faults[:-1])
    assert len({f.at for f in faults[:-1]}) > 3  # spread over the window


def test_explore_exhaustive_reports_what_it_enumerated(tmp_path: Path) -> None:
    out = tmp_path / "x"
    main(["explore", str(SCENARIOS / "campaign" / "hvd_upstream_3_hosts.yaml"),
          "--exhaustive", "--out", str(out), "--reports", "none"])
    ex = json.loads((out / "explore.json").read_text())["exhaustive"]
    assert ex["world"] == "DriverWorld" and ex["states"] > 100 and ex["seconds"] >= 0
    first = next(p for p in ex["paths"] if p["check"] == "avoidable_job_failure")
    assert first["faults"] == ["discovery_error"] and first["shown_in_sim"] >= 1
