"""The reproducers that ``elastic-sim explore`` found and that were kept (scenarios/found/)
still show their violation: exactly the checks the file declares in
``expect.violated_checks`` fail (at the top level, among them the check its name says) and
every other expectation holds, so ``elastic-sim run`` passes while the documented upstream
behaviour is still there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sim.checks import CHECKS, run_checks
from elastic_sim.cli import main
from elastic_sim.mechanisms import known, signatures_of
from elastic_sim.scenario import load_scenario
from elastic_sim.trace import read_trace

FOUND = Path(__file__).resolve().parent.parent.parent / "scenarios" / "found"
NAMES = sorted(p.name for p in FOUND.glob("*.yaml"))


def check_in(name: str) -> str:
    (check,) = [c.__name__ for c in CHECKS if name.removesuffix(".yaml").endswith(c.__name__)]
    return check


@pytest.mark.parametrize("name", NAMES)
def test_a_kept_reproducer_declares_the_check_its_name_says(name: str) -> None:
    documented = load_scenario(FOUND / name).expect.violated_checks or []
    assert check_in(name) in documented


# -- the exploration campaign on the faithful models: scenarios/found/<model>/ ------------
# Each reproducer there is named after its mechanism and declares the checks it breaks in
# expect.violated_checks, with the outcome the job ends with: `elastic-sim run` passes
# (exit 0) exactly while the documented violation, and no other, is still there.

CAMPAIGN = sorted(p.relative_to(FOUND).as_posix() for p in FOUND.glob("*/*.yaml"))


@pytest.mark.parametrize("rel", [*NAMES, *CAMPAIGN])
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
    # ... and mechanisms.json records its mechanisms, as explore names them
    events = read_trace(out / "trace.jsonl")
    sigs = signatures_of(run_checks(events, documented), (), events)
    protocol = load_scenario(FOUND / rel).protocol.name or "static"
    recorded = known().records.get(protocol, {})
    assert sorted(str(s) for s in sigs if str(s) not in recorded) == []


def test_the_readme_lists_every_campaign_reproducer() -> None:
    readme = (FOUND / "README.md").read_text(encoding="utf-8")
    assert CAMPAIGN, "no reproducer under scenarios/found/<model>/"
    assert [rel for rel in CAMPAIGN if rel not in readme] == []
