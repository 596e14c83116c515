"""`elastic-sim report` re-renders runs and campaigns; `elastic-sim run` writes the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from elastic_sim.outdir import MANIFEST
from elastic_sim.trace import write_trace
from tests.reports.synth import static_run, summary_for
from tests.reports.test_perfetto import schema_errors

ROOT = Path(__file__).resolve().parents[2]
REPORT_FILES = {"report.html", "timeline.png", "world_size.png", "recovery.png",
                "trace.perfetto.json"}


def _run_dir(path: Path, **synth: Any) -> Path:
    events = static_run(**synth)
    path.mkdir(parents=True)
    write_trace(path / "trace.jsonl", events)
    (path / "summary.json").write_text(json.dumps(summary_for(events)), encoding="utf-8")
    return path


def test_report_rerenders_a_run_from_its_trace_and_summary(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run")
    assert main(["report", str(run)]) == 0
    assert REPORT_FILES <= {p.name for p in run.iterdir()}
    assert "4 → 3" in (run / "report.html").read_text("utf-8")
    assert schema_errors(json.loads((run / "trace.perfetto.json").read_text("utf-8"))) == []


def test_report_of_a_directory_of_runs_writes_a_campaign(tmp_path: Path) -> None:
    for seed, rdzv in enumerate((0.5, 1.0, 2.0)):
        _run_dir(tmp_path / f"s{seed}", rendezvous=rdzv)
    bad = tmp_path / "s1" / "summary.json"
    summary = json.loads(bad.read_text("utf-8"))
    summary["verdict"] = "fail"
    summary["checks"] = [{"name": "state_agreement", "ok": False, "violations": [
        {"message": "round 1: <h2> holds step 20", "witness": []}]}]
    bad.write_text(json.dumps(summary), encoding="utf-8")

    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "campaign.html").read_text("utf-8")
    assert "Campaign: 3 runs" in page and "2 passed, 1 failed" in page
    assert "round 1: &lt;h2&gt; holds step 20" in page
    # recovery = detect 0.158 + rendezvous + sync 0.005 + first step 0.1; p50 is the middle
    assert "<td>crash</td><td class=\"num\">3</td><td class=\"num\">1.263</td>" in page
    assert "<td>collective_failed</td><td>restore</td><td class=\"num\">3</td>" in page
    assert (tmp_path / "campaign_recovery.png").is_file()


def test_report_of_a_directory_without_runs_is_bad_input(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_run_writes_the_report_by_default_and_no_report_turns_it_off(tmp_path: Path) -> None:
    scenario = str(ROOT / "scenarios" / "scale_down.yaml")
    assert main(["run", scenario, "--out", str(tmp_path / "on"), "-q"]) == 0
    page = (tmp_path / "on" / "report.html").read_text("utf-8")
    assert "crash-h3" in page and "4 → 3" in page
    perfetto = json.loads((tmp_path / "on" / "trace.perfetto.json").read_text("utf-8"))
    assert schema_errors(perfetto) == []
    assert main(["run", scenario, "--out", str(tmp_path / "off"), "-q", "--no-report"]) == 0
    assert {p.name for p in (tmp_path / "off").iterdir()} == {"trace.jsonl", "summary.json",
                                                               MANIFEST}
