#!/usr/bin/env python3
"""Measure the fast test lane and write its figures into the README, not by hand.

    python scripts/fast_lane_figures.py [--check]

Runs ``python -m pytest -m "not real and not slow" -n logical`` (the lane the README
describes), takes the number of tests from pytest's closing line, its wall time, the CPU
time of the run (all its processes) and the machine's load, and rewrites the README's
sentence between ``<!-- fast-lane -->`` and ``<!-- /fast-lane -->``. With ``--check`` it only
compares the README's test count with what pytest collects for that lane (what
tests/test_layout.py does) and exits 1 if they differ.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LANE = ["-m", "not real and not slow"]
START, END = "<!-- fast-lane -->", "<!-- /fast-lane -->"


def collected() -> int:
    """How many tests the fast lane selects (pytest --collect-only)."""
    out = subprocess.run([sys.executable, "-m", "pytest", *LANE, "--collect-only", "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                         check=False).stdout
    m = re.search(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", out)
    if m is None:
        sys.exit(f"no count in pytest's output:\n{out[-2000:]}")
    return int(m.group(1))


def readme_count() -> int:
    """The test count the README's fast-lane sentence states."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(START):text.index(END)]
    return int(re.search(r"([\d,]+) tests", block).group(1).replace(",", ""))  # type: ignore[union-attr]


def measure() -> tuple[int, float, float]:
    """Run the lane: (tests passed, wall seconds, CPU seconds of every process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", *LANE, "-n", "logical", "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"(\d+) passed", proc.stdout.splitlines()[-1] if proc.stdout else "")
    if proc.returncode != 0 or m is None:
        sys.exit(f"the fast lane did not pass (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return int(m.group(1)), wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        have, want = readme_count(), collected()
        print(f"README: {have} tests; pytest collects {want}")
        return 0 if have == want else 1
    load = os.getloadavg()[0]
    tests, wall, cpu = measure()
    sentence = (f"{START}`.venv/bin/python -m pytest -m \"not real and not slow\" -n logical`: "
                f"{tests:,} tests in {wall:.0f} s of wall time on this project's "
                f"{os.cpu_count()}-core machine ({cpu:.0f} s of CPU; load average {load:.1f} "
                f"when it started; measured {time.strftime('%Y-%m-%d')} by "
                f"`scripts/fast_lane_figures.py`, which writes this sentence){END}")
    text = README.read_text(encoding="utf-8")
    text = text[:text.index(START)] + sentence + text[text.index(END) + len(END):]
    README.write_text(text, encoding="utf-8")
    print(sentence)
    return 0


if __name__ == "__main__":
    sys.exit(main())
