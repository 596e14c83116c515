"""The real lane runs one test at a time: under pytest-xdist's ``--dist loadgroup`` every
``real`` test goes to one worker, and two pytest runs on one machine never run real tests
side by side (tests/conftest.py). A CI run once failed when the grouping had silently
stopped working (xdist 3.8 under pytest 9.2) and one test's leftover-process check saw
another's processes; these tests run small suites of their own through the suite's conftest
and read when each of their tests ran, and where."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SUITE = '''
import json, os, time
import pytest

@pytest.mark.real
@pytest.mark.parametrize("i", range(6))
def test_real(i):
    start = time.monotonic()
    time.sleep(0.3)
    with open(os.environ["LOG"], "a") as log:
        log.write(json.dumps({"kind": "real", "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                              "start": start, "end": time.monotonic()}) + "\\n")

@pytest.mark.parametrize("i", range(6))
def test_sim(i):
    time.sleep(0.05)
'''


def write_suite(path: Path) -> None:
    path.mkdir()
    (path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (path / "test_lane.py").write_text(SUITE)
    (path / "pytest.ini").write_text("[pytest]\nmarkers =\n    real: starts real processes\n")


def run(suite: Path, log: Path, lock: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LOG": str(log), "ELASTIC_SIM_TEST_REAL_LOCK": str(lock)}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--rootdir", str(suite), *args, str(suite)],
                            cwd=suite, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def overlapping(recs: list[dict[str, object]]) -> list[tuple[float, float]]:
    spans = sorted((float(r["start"]), float(r["end"])) for r in recs)  # type: ignore[arg-type]
    return [(a, b) for (a, b), (c, _) in itertools.pairwise(spans) if c < b]


def test_xdist_sends_every_real_test_to_one_worker(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    suite, log = tmp_path / "suite", tmp_path / "log.jsonl"
    write_suite(suite)
    proc = run(suite, log, tmp_path / "lock", "-n", "3", "--dist", "loadgroup")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    recs = records(log)
    assert len(recs) == 6
    assert len({r["worker"] for r in recs}) == 1, recs
    assert overlapping(recs) == []


def test_two_pytest_runs_never_run_real_tests_at_once(tmp_path: Path) -> None:
    suite, log = tmp_path / "suite", tmp_path / "log.jsonl"
    write_suite(suite)
    procs = [run(suite, log, tmp_path / "lock", "-p", "no:xdist", "-m", "real")
             for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    recs = records(log)
    assert len(recs) == 12
    assert overlapping(recs) == []
