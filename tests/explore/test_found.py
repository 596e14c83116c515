"""The reproducers that ``elastic-sim explore`` found and that were kept (scenarios/found/)
still show their violation: at the top level, the check named in the file name fails, exit
code 1; in the per-model folders of the exploration campaign, exactly the checks the file
declares in ``expect.violated_checks`` fail and every other expectation holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.checks import CHECKS
from elastic_sim.cli import main
from elastic_sim.scenario import load_scenario

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


# -- the exploration campaign on the faithful models: scenarios/found/<model>/ ------------
# Each reproducer there is named after its mechanism and declares the checks it breaks in
# expect.violated_checks, with the outcome the job ends with: `elastic-sim run` passes
# (exit 0) exactly while the documented violation, and no other, is still there.

CAMPAIGN = sorted(p.relative_to(FOUND).as_posix() for p in FOUND.glob("*/*.yaml"))


@pytest.mark.parametrize("rel", CAMPAIGN)
def test_a_campaign_reproducer_shows_exactly_its_documented_violation(
    tmp_path: Path, rel: str
) -> None:
    documented = load_scenario(FOUND / rel).expect.violated_checks
    assert documented, f"{rel} names no check in expect.violated_checks"
    out = tmp_path / "out"
    rc = main(["run", str(FOUND / rel), "--out", str(out), "--quiet", "--no-report"])
    summary = json.loads((out / "summary.json").read_text())
    failed = sorted(c["name"] for c in summary["checks"] if not c["ok"])
    unmet = [e["name"] for e in summary["expectations"] if not e["ok"]]
    assert failed == sorted(documented)
    assert (rc, unmet) == (0, [])


def test_the_readme_lists_every_campaign_reproducer() -> None:
    readme = (FOUND / "README.md").read_text(encoding="utf-8")
    assert CAMPAIGN, "no reproducer under scenarios/found/<model>/"
    assert [rel for rel in CAMPAIGN if rel not in readme] == []
