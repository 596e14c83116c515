"""The campaign report tells expected violations (a scenario's ``violated_checks``) from new
ones, links every run to its report, and counts on whole-number axes."""

from __future__ import annotations

import re
from pathlib import Path

from elastic_sim.cli import main
from elastic_sim.reports.campaign import Campaign, RunRecord, campaign_figure
from tests.conftest import SCENARIOS


def test_expected_and_new_violations_apart_and_runs_linked(tmp_path: Path) -> None:
    main(["run", str(SCENARIOS / "torchelastic" / "rank0_host_crash.yaml"), "--out",
          str(tmp_path / "te"), "--quiet"])
    main(["run", str(SCENARIOS / "broken_skip_sync.yaml"), "--out", str(tmp_path / "broken"),
          "--quiet", "--no-report"])
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "campaign.html").read_text()
    new = page.split("<h2>New violations")[1].split("<h2>")[0]
    expected = page.split("<h2>Expected violations")[1].split("<h2>")[0]
    assert "state_agreement" in new and "master_agreement" not in new
    assert "master_agreement" in expected and "state_agreement" not in expected
    runs = page.split("<h2>Runs</h2>")[1]
    hrefs = re.findall(r'<a href="([^"]+)">', runs)
    assert sorted(hrefs) == ["broken/summary.json", "te/report.html"]
    assert all((tmp_path / h).is_file() for h in hrefs)


def test_the_recovery_histogram_counts_in_whole_numbers() -> None:
    runs = [RunRecord(dir=Path(f"r{i}"), name="s", seed=i, verdict="pass", outcome="completed",
                      recoveries=[{"type": "crash", "recovery_s": 1.0 + i / 10,
                                   "phases": {"detect": 0.5}}], violations=[], unmet=[])
            for i in range(3)]
    fig = campaign_figure(Campaign(runs))
    assert fig is not None
    hist = fig.axes[0]
    fig.canvas.draw()
    ticks = [t for t in hist.get_yticks() if hist.get_ylim()[0] <= t <= hist.get_ylim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)


def test_coverage_names_the_event_kinds_no_run_reached(tmp_path: Path) -> None:
    """The vocabulary is every kind the trace format defines (it was empty once the kinds moved
    out of the trace module's docstring, and the page then said every kind was reached)."""
    from elastic_sim.reports.campaign import vocabulary
    from elastic_sim.trace_kinds import EVENT_KINDS

    vocab = vocabulary()
    assert vocab == [k.kind for k in EVENT_KINDS] and "hvd_spawner_error" in vocab
    main(["run", str(SCENARIOS / "torchelastic" / "rank0_host_crash.yaml"), "--out",
          str(tmp_path / "te"), "--quiet", "--no-report"])
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "campaign.html").read_text()
    never = page.split("Never reached: ")[1].split("</p>")[0].split(", ")
    assert "hvd_spawner_error" in never and "rdzv_done" not in never
