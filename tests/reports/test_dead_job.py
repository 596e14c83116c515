"""A job that dies: the progress it lost (the steps since its last commit, which a restart
redoes, and the steps it never did), a report that tells "expectations met" apart from
"job healthy", and one stall figure per fault everywhere it is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.pipeline import execute
from elastic_sim.spec import compile_spec


def test_the_store_host_s_crash_kills_the_job_and_the_report_says_what_it_lost(
        tmp_path: Path) -> None:
    report = execute(compile_spec("torchelastic/store_host_crash"), tmp_path, write_report=True)
    m = report.metrics
    assert report.passed and m.outcome == "failed"  # as the scenario expects
    commits = [int(e.get("step")) for e in report.events if e.kind == "commit"]
    assert m.steps_done == 65 and max(commits) == 60
    assert m.lost_steps == 65 - 60 and m.unfinished_steps == 120 - 65
    (rec,) = m.recoveries
    assert rec.lost_steps == 5 and m.lost_samples == 5 * 3 * 32  # 3 workers, batch 32
    # One stall figure: the fault's is the sum of the stalls blamed on it.
    blamed = sum(st.duration for st in m.stalls if st.cause == rec.id)
    assert blamed > 0 and rec.stall_s == pytest.approx(blamed)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["metrics"]["recoveries"][0]["stall_s"] == pytest.approx(blamed, abs=1e-6)
    assert summary["metrics"]["unfinished_steps"] == 55
    page = (tmp_path / "report.html").read_text()
    assert ">PASS: expectations met</span>" in page and ">job failed</span>" in page
    assert "55 of 120 steps" in page
