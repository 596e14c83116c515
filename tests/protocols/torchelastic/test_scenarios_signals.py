"""A signal-driven shutdown (preemption with notice) does not close the rendezvous, so the
rest of the job survives the preempted host; in sim and in real mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main

DIR = Path(__file__).resolve().parents[3] / "scenarios" / "torchelastic"


def run(tmp_path: Path, mode: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    out = tmp_path / mode
    rc = main(["run", str(DIR / "preemption.yaml"), "--mode", mode, "--out", str(out),
               "--quiet", "--no-report"])
    events = [json.loads(line) for line in (out / "trace.jsonl").open()]
    return rc, json.loads((out / "summary.json").read_text()), events


def assert_preempted_agent_left_without_closing(s: dict[str, Any],
                                                events: list[dict[str, Any]]) -> None:
    h2 = [e for e in events if e["proc"] == "h2/main"]
    failed = [e["data"]["error"] for e in h2 if e["kind"] == "job_failed"]
    assert len(failed) == 1 and failed[0].startswith("SignalException")
    assert not [e for e in h2 if e["kind"] == "rdzv_shutdown"]
    assert s["exit_codes"]["h2/main"] == 1
    assert [r["members"] for r in s["metrics"]["rounds"]] == [["h0", "h1", "h2"], ["h0", "h1"]]
    assert s["metrics"]["outcome"] == "completed"


def test_preempted_agent_leaves_the_rendezvous_open_and_the_job_survives(
    tmp_path: Path,
) -> None:
    rc, s, events = run(tmp_path, "sim")
    assert rc == 0
    assert_preempted_agent_left_without_closing(s, events)


@pytest.mark.real
@pytest.mark.slow
def test_preemption_in_real_mode_matches(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="real mode needs torch")
    rc, s, events = run(tmp_path, "real")
    unmet = [e for e in s["expectations"] if not e["ok"]]
    assert (rc, unmet) == (0, [])
    assert_preempted_agent_left_without_closing(s, events)
