"""``elastic-sim sweep``: a scenario over many seeds, any number of workers, into a campaign
report; the exit code says whether every seed held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.errors import ScenarioError
from elastic_sim.spec import compile_spec
from elastic_sim.sweep import parse_seeds, sweep
from tests.conftest import SCENARIOS


def test_seed_specs() -> None:
    assert parse_seeds("1-4") == [1, 2, 3, 4]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1-3,9, 2") == [1, 2, 3, 9]
    for bad in ("", "a-b", "5-1", "-3", "1-"):
        with pytest.raises(ScenarioError):
            parse_seeds(bad)


def test_bad_seeds_exit_2_and_write_nothing(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "scale_down", "--seeds", "9-1", "--out", str(tmp_path / "o")]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_workers_do_not_change_the_runs(tmp_path: Path) -> None:
    spec = compile_spec(SCENARIOS / "scale_down.yaml")
    one = sweep(spec, [3, 4, 5], tmp_path / "one")
    two = sweep(spec, [3, 4, 5], tmp_path / "two", workers=2)
    assert [r.seed for r in two] == [3, 4, 5]
    assert [(r.seed, r.passed, r.failures) for r in one] == [
        (r.seed, r.passed, r.failures) for r in two]

    def sha(d: Path) -> str:
        return str(json.loads((d / "summary.json").read_text())["trace"]["sha256"])

    assert [sha(r.out_dir) for r in one] == [sha(r.out_dir) for r in two]
    assert len({sha(r.out_dir) for r in one}) == 3  # the seed reaches the run


def test_sweep_writes_a_campaign_and_exits_1_when_a_seed_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    rc = main(["sweep", str(SCENARIOS / "broken_skip_sync.yaml"), "--seeds", "1,2",
               "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 1
    assert "FAIL seed 1" in text and "FAIL seed 2" in text
    assert "check state_agreement:" in text
    assert "2 runs: 0 passed, 2 failed" in text
    assert (out / "campaign.html").is_file()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "broken_skip_sync-sim-s1", "broken_skip_sync-sim-s2"]


def test_a_sweep_that_holds_exits_0(tmp_path: Path) -> None:
    assert main(["sweep", "hang_heals", "--seeds", "0-1", "--out", str(tmp_path)]) == 0
