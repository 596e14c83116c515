"""``explore --vary``: knobs and the store host drawn per case within declared ranges,
checked against the scenario up front, written into the reproducer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.scenario import load_scenario
from elastic_sim.variation import apply_variation, draw_variation, parse_vary

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_a_range_of_integers_a_range_of_seconds_and_a_list() -> None:
    assert parse_vary("knobs.max_restarts=0..3").integers
    secs = parse_vary("knobs.heartbeat_timeout=0.5..30")
    assert not secs.integers and (secs.lo, secs.hi) == (0.5, 30.0)
    assert parse_vary("cluster.store_host=h0,h2").choices == ("h0", "h2")
    varies = [parse_vary("knobs.max_restarts=0..3"), parse_vary("cluster.store_host=h0,h2")]
    drawn = {draw_variation(f"s/{i}", varies) for i in range(40)}
    assert drawn == {(("knobs.max_restarts", r), ("cluster.store_host", h))
                     for r in range(4) for h in ("h0", "h2")}
    assert draw_variation("s/1", varies) == draw_variation("s/1", varies)


def test_a_variation_changes_the_scenario_it_is_applied_to() -> None:
    sc = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")
    varied = apply_variation(sc, (("knobs.max_restarts", 0), ("cluster.store_host", "h2")))
    assert varied.knobs()["max_restarts"] == 0 and varied.store_host == "h2"
    assert sc.knobs()["max_restarts"] == 3


@pytest.mark.parametrize("spec,needle", [
    ("knobs.max_restarts", "expected knobs.NAME=LO..HI"),
    ("knobs.max_restarts=3..1", "LO <= HI"),
    ("knobs.no_such_knob=1..2", "no_such_knob"),
    ("cluster.store_host=h0,h9", "unknown host 'h9'"),
])
def test_a_bad_variation_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, needle: str
) -> None:
    rc = main(["explore", str(SCENARIOS / "torchelastic" / "scale_down.yaml"), "--budget", "1",
               "--out", str(tmp_path), "--vary", spec])
    err = capsys.readouterr().err
    assert rc == 2 and "--vary" in err and needle in err and len(err.strip().splitlines()) == 1


def test_a_found_violation_keeps_its_variation_in_the_reproducer(tmp_path: Path) -> None:
    out = tmp_path / "ex"
    main(["explore", str(SCENARIOS / "scale_down.yaml"), "--budget", "30", "--out", str(out),
          "--faults", "crash", "--max-faults", "1", "--horizon", "0.002", "--no-triggers",
          "--vary", "knobs.last_call=0.5..2"])
    res = json.loads((out / "explore.json").read_text())
    assert res["violations"]
    for v in res["violations"]:
        assert 0.5 <= v["variation"]["knobs.last_call"] <= 2
        sc = load_scenario(v["reproducer"])
        assert sc.knobs()["last_call"] == v["variation"]["knobs.last_call"]
        assert v["reproduced"]
