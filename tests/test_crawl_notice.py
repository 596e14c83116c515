"""A legal knob that makes a run crawl (a keep-alive every 10 us, a heartbeat that counts
every node dead at once) is named, once, while the run goes on: the run only ends at its
wall limit, and the user is told why it is slow. A shipped scenario gets no notice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from elastic_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], knobs: dict[str, object],
         *extra: str) -> list[str]:
    raw = yaml.safe_load((ROOT / "scenarios" / "torchelastic" / "scale_down.yaml").read_text())
    raw["protocol"]["knobs"].update(knobs)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-report",
          *extra])
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]


@pytest.mark.parametrize("knob,value", [("keep_alive_interval", 1e-5),
                                        ("keep_alive_max_attempt", 0)])
def test_a_knob_that_makes_the_run_crawl_is_named_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], knob: str, value: float) -> None:
    notes = _run(tmp_path, capsys, {knob: value}, "--wall-limit", "20")
    assert len(notes) == 1, notes
    assert "crawls" in notes[0] and f"{knob}: {value:g}" in notes[0].split("makes it")[0]


def test_a_shipped_scenario_gets_no_notice(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, capsys, {}) == []
