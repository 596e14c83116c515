"""Members as people read them: host=rank, Horovod's host:slot=rank, long lists summarised
(console, report.html, the timeline plot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.reports.members import members_text, process_label
from elastic_sim.reports.plots import timeline_rows
from elastic_sim.reports.spans import fault_spans, timelines
from elastic_sim.trace import read_trace
from tests.conftest import SCENARIOS


def test_short_lists_are_written_out_with_ranks() -> None:
    assert members_text(["h0", "h2", "h1"], {"h0": 0, "h1": 2, "h2": 1}) == "h0=0 h2=1 h1=2"
    assert members_text(["h0", "h1"], {}) == "h0 h1"


def test_horovod_members_are_host_slot_with_their_ranks() -> None:
    # Horovod's rdzv_done lists rank r's host at position r.
    members = ["127.0.0.1", "127.0.0.1", "localhost", "localhost"]
    assert members_text(members, {"127.0.0.1": 0, "localhost": 2}) == \
        "127.0.0.1:0=0 127.0.0.1:1=1 localhost:0=2 localhost:1=3"


def test_long_lists_are_runs_with_their_count_and_gaps_shown() -> None:
    hosts = [f"h{i}" for i in range(64)]
    assert members_text(sorted(hosts), {h: i for i, h in enumerate(sorted(hosts))}) == \
        "h0..h63 (64)"  # ranks in string order do not run along the names: left out
    gap = [h for h in hosts if h != "h10"]
    assert members_text(gap, {h: i for i, h in enumerate(gap)}) == \
        "h0..h9=0..9 h11..h63=10..62 (63)"
    assert members_text([f"h{i}" for i in range(64) for _ in range(8)], {}) == \
        "h0..h63:0..7=0..511 (512)"  # Horovod, 8 slots per host
    assert members_text([f"h{i}" for i in range(30)] + ["h40"], {}) == "h0..h29 h40 (31)"
    many = members_text([f"n{2 * i}" for i in range(20)], {})
    assert many.startswith("n0 n2 n4") and many.endswith(" … +12 runs (20)")


def test_timeline_rows_name_horovod_workers_by_host_slot_and_rank() -> None:
    assert process_label("h1/w3.7", "h1", [3, 1]) == "h1:3 (w3.7) r3→1"
    assert process_label("h1/main", "h1", []) == "h1/main"
    assert process_label("h1/main", "h1", [0, 1, 2, 3, 4, 5]) == "h1/main r0→1→…→5"


def test_a_horovod_run_shows_host_slot_and_rank_in_console_report_and_timeline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    main(["run", str(SCENARIOS / "horovod" / "all_hosts_blacklisted.yaml"), "--out", str(out)])
    want = "127.0.0.1:0=0 127.0.0.1:1=1 localhost:0=2 localhost:1=3"
    assert want in capsys.readouterr().out
    assert want in (out / "report.html").read_text()
    events = read_trace(out / "trace.jsonl")
    labels = [r.label for r in timeline_rows(timelines(events), fault_spans(events))]
    assert "127.0.0.1:0 (w0.1) r0" in labels and "localhost:1 (w1.4) r3" in labels


def test_64_hosts_are_summarised_in_console_and_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], write_scenario) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario("""
name: big
seed: 0
time_limit: 60
protocol: {name: static, knobs: {min_hosts: 2, max_hosts: 64, last_call: 1.0}}
cluster: {hosts: 64}
workload: {steps: 2, step_time: 0.1, commit_every: 1, state_bytes: 1024}
""")
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    assert "h0..h63 (64)" in capsys.readouterr().out
    assert "h0..h63 (64)" in (out / "report.html").read_text()
