"""``elastic-sim explore`` finds violations, shrinks them, writes reproducers that replay
byte for byte, and finds nothing in the static protocol under faults within its contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from elastic_sim.explore import explore, space_for
from elastic_sim.testing import load, variant
from elastic_sim.trace import file_sha256

ROOT = Path(__file__).resolve().parent.parent.parent
SCENARIOS = ROOT / "scenarios"


def explore_cli(tmp_path: Path, scenario: str, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "explore"
    rc = main(["explore", str(SCENARIOS / scenario), "--out", str(out), *extra])
    return rc, json.loads((out / "explore.json").read_text())


def test_broken_variant_is_caught_shrunk_and_its_reproducer_replays_byte_identical(
    tmp_path: Path,
) -> None:
    rc, res = explore_cli(tmp_path, "broken_skip_sync.yaml", "--budget", "20", "--replace",
                          "--faults", "crash,hang,partition", "--no-triggers")
    assert rc == 1
    # The variant's own mechanism (it breaks by itself, no fault needed): a broken promise,
    # listed first; anything else found is a known weak spot of the static protocol.
    found = res["violations"]
    mechanisms = [v["mechanism"] for v in found]
    assert len(set(mechanisms)) == len(mechanisms)
    v = found[0]
    assert (v["check"], v["where"], v["class"]) == ("state_agreement", "sync,sync",
                                                    "broken_promise")
    assert all(w["standing"] != "broken_promise" for w in found
               if w["check"] != "state_agreement")
    assert len(v["faults"]) <= 3 and all(x["reproduced"] for x in found)
    # The reproducer, run by a user, shows the same violation with the same trace bytes.
    out = tmp_path / "replay"
    rc2 = main(["run", v["reproducer"], "--out", str(out), "--quiet", "--no-report"])
    summary = json.loads((out / "summary.json").read_text())
    assert rc2 == 1
    assert [c["name"] for c in summary["checks"] if not c["ok"]] == ["state_agreement"]
    assert file_sha256(out / "trace.jsonl") == v["trace_sha256"]
    assert (Path(v["run_dir"]) / "report.html").is_file()


@pytest.mark.slow
def test_a_bug_that_needs_a_fault_is_shrunk_to_one_fault(tmp_path: Path) -> None:
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "static-no-rollback",
                 "tests.explore.variants:no_rollback_main")
    res = explore(sc, space_for(sc), seed=0, budget=40, out_dir=tmp_path)
    mine = [f for f in res.findings if f.signature.check == "committed_progress"]
    assert mine, "the no-rollback variant must be caught"
    # Each mechanism (who restored, and why) shrinks to what it needs: one fault for the
    # first, never more than the case it was found in.
    assert len(mine[0].faults) == 1
    for f in mine:
        assert len(f.faults) <= len(f.original)
        assert f.reproduced
        assert f.reproducer is not None and f.run_dir is not None
        assert file_sha256(f.run_dir / "trace.jsonl") == f.trace_sha256


@pytest.mark.slow
def test_the_same_search_seed_finds_the_same_violations_with_any_number_of_workers(
    tmp_path: Path,
) -> None:
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "static-no-rollback",
                 "tests.explore.variants:no_rollback_main")
    space = space_for(sc)

    def found(workers: int) -> list[tuple[str, list[str], int]]:
        res = explore(sc, space, seed=3, budget=12, workers=workers)
        assert res.cases == 12
        return [(str(f.signature), [repr(x) for x in f.faults], f.seed) for f in res.findings]

    one = found(1)
    assert one and one == found(1) == found(2)


@pytest.mark.slow
def test_static_protocol_shows_no_violation_under_faults_within_its_contract(
    tmp_path: Path,
) -> None:
    # Its contract: min_hosts (2 of 4) survive; a host dying after it joined a round stays
    # in that round until group creation fails (alive-at-completion is not promised).
    rc, res = explore_cli(tmp_path, "scale_down.yaml", "--budget", "120", "--workers", "2",
                          "--max-crashes", "2", "--ignore", "members_alive_at_completion",
                          "--faults", "crash,hang,partition", "--no-triggers", "--replace",
                          "--max-duration", "60")
    # Whatever it finds broke an assumption of the contract (its coordinator hit).
    assert (rc, res["cases"]) == (0, 120)
    assert [v["mechanism"] for v in res["violations"]
            if v["standing"] != "outside_contract"] == []
    assert res["ignored_checks"] == ["members_alive_at_completion"]


def test_outside_its_contract_the_static_protocol_admits_a_dead_member(tmp_path: Path) -> None:
    # A crash in the first 2 ms: while round 0 (full at once: max_hosts 4) gathers them.
    common = ("--budget", "40", "--faults", "crash", "--max-faults", "1", "--horizon", "0.002",
              "--replace", "--no-triggers")
    rc, res = explore_cli(tmp_path, "scale_down.yaml", *common)
    found = {v["check"]: v for v in res["violations"]}
    v = found["members_alive_at_completion"]
    assert len(v["faults"]) == 1 and v["faults"][0]["type"] == "crash" and v["reproduced"]
    # The static protocol's known weak spot: reported, but by default it fails no campaign.
    assert v["standing"] == "weak_spot" and rc == 0
    assert explore_cli(tmp_path, "scale_down.yaml", *common, "--fail-on", "any")[0] == 1


@pytest.mark.parametrize("args,needle", [
    (["--budget", "5", "--faults", "crash,meteor"], "cannot generate fault type 'meteor'"),
    (["--budget", "5", "--spare", "h9"], "unknown host 'h9'"),
    (["--time", "-1"], "--time"),
])
def test_bad_explore_arguments_exit_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    rc = main(["explore", str(SCENARIOS / "scale_down.yaml"), "--out", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_a_time_limited_search_stops_and_reports_what_it_ran(tmp_path: Path) -> None:
    rc, res = explore_cli(tmp_path, "scale_down.yaml", "--time", "1", "--max-crashes", "2",
                          "--ignore", "members_alive_at_completion", "--replace",
                          "--max-duration", "60", "--faults", "crash,hang,partition",
                          "--no-triggers")
    assert rc == 0 and res["cases"] > 0 and res["time_s"] == 1
    assert all(v["standing"] == "outside_contract" for v in res["violations"])
