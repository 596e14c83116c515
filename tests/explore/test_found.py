"""The reproducers that ``elastic-sim explore`` found and that were kept (scenarios/found/)
still show their violation: the check named in the file name fails, exit code 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.cli import main
from reports.checks import CHECKS

FOUND = Path(__file__).resolve().parent.parent.parent / "scenarios" / "found"
NAMES = sorted(p.name for p in FOUND.glob("*.yaml"))


def check_in(name: str) -> str:
    (check,) = [c.__name__ for c in CHECKS if name.removesuffix(".yaml").endswith(c.__name__)]
    return check


@pytest.mark.parametrize("name", NAMES)
def test_a_kept_reproducer_still_shows_its_violation(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    rc = main(["run", str(FOUND / name), "--out", str(out), "--quiet", "--no-report"])
    summary = json.loads((out / "summary.json").read_text())
    failed = [c["name"] for c in summary["checks"] if not c["ok"]]
    assert rc == 1 and check_in(name) in failed
