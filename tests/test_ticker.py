"""Campaigns in a log: without a terminal, explore (and sweep, compare) print a progress
line at least every few seconds, and a search stopped by Ctrl-C or SIGTERM leaves a valid
explore.json with what it found so far."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic_sim.ticker import Ticker
from tests.conftest import ROOT


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_says_what_is_done_found_and_left() -> None:
    clock, out = _Clock(), io.StringIO()
    with Ticker("explore x", 200, stream=out, clock=clock) as t:
        clock.now += 30
        t.update(50, findings=2)
        assert t.line() == "explore x: 50/200 cases, 2 findings, 100.0 cases/min, ETA 90 s"
        t._ring(signal.SIGALRM, None)
        clock.now += 30
        t.update(200, findings=3)
    lines = out.getvalue().splitlines()
    assert lines == ["explore x: 50/200 cases, 2 findings, 100.0 cases/min, ETA 90 s",
                     "explore x: 200/200 cases, 3 findings, 200.0 cases/min, done in 60 s"]


def test_a_time_budget_says_the_time_left() -> None:
    clock = _Clock()
    t = Ticker("explore x", None, deadline_s=600, stream=io.StringIO(), clock=clock)
    clock.now += 120
    t.update(10)
    assert t.line().endswith("10 cases, 5.0 cases/min, 480 s left")


def _explore(tmp_path: Path, budget: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    log, out = tmp_path / "log", tmp_path / "x"
    env = {**os.environ, "ELASTIC_SIM_PROGRESS_EVERY": "0.5"}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastic_sim", "explore", "torchelastic/hot_spare",
             "--budget", budget, "--out", str(out), "--faults", "crash,hang"],
            stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    return proc, log, out


def _progress(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines()
            if line.startswith("explore te_hot_spare: ")]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_search_in_a_log_shows_progress_and_stopped_keeps_explore_json(
        tmp_path: Path, sig: int) -> None:
    proc, log, out = _explore(tmp_path, "100000")
    try:
        deadline = time.monotonic() + 120
        while not any("ETA" in line for line in _progress(log)):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        proc.send_signal(sig)
        rc = proc.wait(60)
    finally:
        proc.kill()
    assert rc == (130 if sig == signal.SIGINT else 128 + sig)
    doc = json.loads((out / "explore.json").read_text())
    assert doc["stopped"] is True and 0 < doc["cases"] < 100000
    lines = _progress(log)
    assert any(" findings, " in line and "cases/min, ETA " in line for line in lines)
    assert "done in" in lines[-1]  # the last word, as it stopped
