"""The campaign report tells expected violations (a scenario's ``violated_checks``) from new
ones, and links every run to its report."""

from __future__ import annotations

import re
from pathlib import Path

from elastic_sim.cli import main
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
