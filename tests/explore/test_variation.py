"""``explore --vary``: knobs and the store host drawn per case within declared ranges,
checked against the scenario up front, written into the reproducer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from elastic_sim.scenario import Scenario, load_scenario
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
    ("cluster.hosts=0..3", "cluster.hosts: 0"),  # no host at all
    ("cluster.hosts=2.5..4", "whole numbers"),
    ("cluster.hosts=a,b", "whole numbers"),
    ("cluster.spares=0..2 knobs.max_nodes=2..3", "max_nodes, which is varied too"),
    ("cluster.bogus=1..2", "expected knobs.NAME"),
])
def test_a_bad_variation_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, needle: str
) -> None:
    varies = [a for one in spec.split() for a in ("--vary", one)]
    rc = main(["explore", str(SCENARIOS / "torchelastic" / "scale_down.yaml"), "--budget", "1",
               "--out", str(tmp_path), *varies])
    err = capsys.readouterr().err
    assert rc == 2 and "--vary" in err and needle in err and len(err.strip().splitlines()) == 1


def _reproducer_of(sc: Scenario, path: str) -> Any:
    if path == "cluster.hosts":
        return len(sc.cluster.host_specs())
    return sc.knobs()[path.removeprefix("knobs.")]


@pytest.mark.parametrize(("spec", "lo", "hi"), [("knobs.last_call=0.5..2", 0.5, 2),
                                                ("cluster.hosts=3..5", 3, 5)])
def test_a_found_violation_keeps_its_variation_in_the_reproducer(
        tmp_path: Path, spec: str, lo: float, hi: float) -> None:
    out = tmp_path / "ex"
    main(["explore", str(SCENARIOS / "scale_down.yaml"), "--budget", "30", "--out", str(out),
          "--faults", "crash", "--max-faults", "1", "--horizon", "0.002", "--no-triggers",
          "--vary", spec])
    path = spec.split("=")[0]
    res = json.loads((out / "explore.json").read_text())
    assert res["violations"]
    for v in res["violations"]:
        assert lo <= v["variation"][path] <= hi
        sc = load_scenario(v["reproducer"])
        assert _reproducer_of(sc, path) == v["variation"][path]  # the drawn shape, too
        assert v["reproduced"]


# -- the cluster's shape ------------------------------------------------------------------------


def test_a_host_count_keeps_the_first_hosts_with_their_settings_and_adds_plain_ones() -> None:
    from elastic_sim.variation import resized

    sc = load_scenario(SCENARIOS / "torchelastic" / "hot_spare.yaml")  # h0, h1, h2 (late)
    five = apply_variation(sc, (("cluster.hosts", 5),))
    assert [h.name for h in five.cluster.host_specs()] == ["h0", "h1", "h2", "h3", "h4"]
    assert five.cluster.host_specs()[2].start_at == 3.0  # h2 keeps its own settings
    two = apply_variation(sc, (("cluster.hosts", 2),))
    assert [h.name for h in two.cluster.host_specs()] == ["h0", "h1"]
    assert resized(("a", "h1"), 4) == ("a", "h1", "h0", "h2")
    counted = load_scenario(SCENARIOS / "torchelastic" / "scale_down.yaml")
    assert isinstance(counted.cluster.hosts, int) or counted.cluster.hosts
    assert len(apply_variation(counted, (("cluster.hosts", 6),)).cluster.host_specs()) == 6


def test_spares_count_beyond_the_maximum_and_each_case_s_faults_aim_at_its_own_hosts() -> None:
    from elastic_sim.explore import make_case, space_for
    from elastic_sim.variation import resolve_spares, shape_of

    sc = load_scenario(SCENARIOS / "torchelastic" / "hot_spare.yaml")  # max_nodes 2
    (v,) = resolve_spares(sc, [parse_vary("cluster.spares=0..3")])
    assert (v.path, v.lo, v.hi, v.integers) == ("cluster.hosts", 2, 5, True)
    space = space_for(sc, types=("crash", "hang", "partition"), max_faults=3)
    cases = [make_case(7, i, space, varies=[v]) for i in range(60)]
    shapes = {shape_of(c.variation) for c in cases}
    assert shapes == {2, 3, 4, 5}
    for c in cases:
        n = shape_of(c.variation)
        assert n is not None
        hosts = {f"h{i}" for i in range(n)}
        for f in c.faults:
            assert set(f.hosts()) <= hosts, (n, f)
    on_new = [f for c in cases for f in c.faults if set(f.hosts()) & {"h3", "h4"}]
    assert on_new  # hosts the scenario does not have are hit too
    assert [make_case(7, i, space, varies=[v]) for i in range(60)] == cases  # pure


def test_a_search_without_a_shape_draws_the_schedules_it_drew_before() -> None:
    from elastic_sim.explore import make_case, space_for
    from elastic_sim.faults.schedule import random_schedule

    sc = load_scenario(SCENARIOS / "torchelastic" / "hot_spare.yaml")
    space = space_for(sc, types=("crash", "hang"), max_faults=2)
    knob = [parse_vary("knobs.max_restarts=0..3")]
    for i in range(10):
        assert make_case(3, i, space, varies=knob).faults == random_schedule(
            f"3/schedule/{i}", space)
