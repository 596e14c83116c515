"""``explore --ties``: every case also draws a tie seed, the search stays a pure function of
its seed, and a finding's reproducer carries the tie seed and replays byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from elastic_sim.cli import main
from elastic_sim.explore import explore, make_case, space_for
from elastic_sim.testing import load, variant
from elastic_sim.trace import file_sha256

SCENARIOS = Path(__file__).resolve().parent.parent.parent / "scenarios"


def test_cases_draw_tie_seeds_only_when_asked() -> None:
    sc = load(SCENARIOS / "scale_down.yaml")
    space = space_for(sc)
    assert make_case(0, 5, space).tie_seed is None
    with_ties = make_case(0, 5, space, ties=True)
    assert with_ties.tie_seed is not None
    assert make_case(0, 5, space, ties=True) == with_ties
    # The schedule and the sim seed are the same draw with or without ties.
    assert (with_ties.faults, with_ties.seed) == (make_case(0, 5, space).faults,
                                                   make_case(0, 5, space).seed)


@pytest.mark.slow
def test_a_search_with_ties_writes_the_tie_seed_into_a_reproducer_that_replays(
    tmp_path: Path,
) -> None:
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "static-no-rollback",
                 "tests.explore.variants:no_rollback_main")
    res = explore(sc, space_for(sc), seed=0, budget=40, out_dir=tmp_path, ties=True)
    assert res.findings, "the no-rollback variant must be caught"
    f = res.findings[0]
    assert f.tie_seed is not None and f.reproduced
    assert f.reproducer is not None and f.run_dir is not None
    assert yaml.safe_load(f.reproducer.read_text())["tie_seed"] == f.tie_seed
    summary = json.loads((tmp_path / "explore.json").read_text())
    assert summary["violations"][0]["tie_seed"] == f.tie_seed
    out = tmp_path / "replay"
    main(["run", str(f.reproducer), "--out", str(out), "--quiet", "--no-report"])
    assert file_sha256(out / "trace.jsonl") == f.trace_sha256
