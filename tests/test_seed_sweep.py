"""Every shipped scenario means what it says for every seed: its expectations (and checks)
hold on seeds 0-99 in the sim, or it pins its seed and says why (``seed_pinned``), and then
they hold on that seed. Variants broken on purpose (``demo``), and reproducers without
expectations, are caught by a check on every seed they claim.

Each scenario's seeds are split over a few test items (:data:`PARTS`), so that parallel
test workers (pytest-xdist) share the slow scenarios instead of one worker waiting for all
100 seeds of one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import elastic_sim.sim.kernel as kernel
from elastic_sim.errors import ScenarioError
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import ExpectModel, load_scenario
from elastic_sim.testing import unmet_on_seed

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted(p.relative_to(ROOT / "scenarios").as_posix()
                   for p in (ROOT / "scenarios").rglob("*.yaml"))
SEEDS = range(100)
PARTS = 4
"""Test items per unpinned scenario: seeds 0-24, 25-49, 50-74, 75-99."""
SPIN_LIVELOCK_CALLS = 50_000
"""Callbacks at one instant that end a run as a livelock, in the sweep of a scenario whose
protocol spins on purpose (``broken_spin_at_commit``): the claim is that the spin is caught
on every seed, which does not depend on how long it spins first; at the shipped threshold
(:data:`elastic_sim.sim.kernel.LIVELOCK_CALLS`, 1,000,000) it took 3 s a seed, 37% of the
whole sweep. The shipped threshold is run by tests/test_scenarios_sim.py and
tests/bounds/test_guards.py."""


def _part(part: int) -> range:
    return SEEDS[part * len(SEEDS) // PARTS:(part + 1) * len(SEEDS) // PARTS]


def _pinned(rel: str) -> bool:
    text = (ROOT / "scenarios" / rel).read_text(encoding="utf-8")
    return bool((yaml.safe_load(text) or {}).get("seed_pinned"))


CASES = [(rel, part) for rel in SCENARIOS for part in range(1 if _pinned(rel) else PARTS)]


def test_every_shipped_scenario_is_swept() -> None:
    assert "scale_down.yaml" in SCENARIOS and len(SCENARIOS) >= 40
    # The parts of an unpinned scenario cover seeds 0-99, each once.
    assert [s for p in range(PARTS) for s in _part(p)] == list(SEEDS)
    assert {rel for rel, _ in CASES} == set(SCENARIOS)


@pytest.mark.slow
@pytest.mark.parametrize(("rel", "part"), CASES)
def test_a_shipped_scenario_holds_on_every_seed_it_claims(
        rel: str, part: int, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = load_scenario(ROOT / "scenarios" / rel)
    seeds = [sc.seed] if sc.seed_pinned else _part(part)
    if sc.protocol.knobs.get("broken_spin_at_commit"):
        monkeypatch.setattr(kernel, "LIVELOCK_CALLS", SPIN_LIVELOCK_CALLS)
    failures = {seed: unmet_on_seed(sc, seed) for seed in seeds}
    if sc.demo is not None or sc.expect == ExpectModel():
        # A variant broken on purpose, or a reproducer that states no expectation: what it
        # claims is that a check catches it.
        assert [s for s, unmet in failures.items() if not unmet] == []
        return
    bad = {s: unmet for s, unmet in failures.items() if unmet}
    assert bad == {}, f"{rel}: {len(seeds) - len(bad)}/{len(seeds)} seeds hold; first: " \
        f"seed {min(bad)}: {bad[min(bad)]}"


def test_the_flagship_holds_on_both_of_its_outcomes() -> None:
    sc = load_scenario(ROOT / "scenarios" / "scale_down.yaml")
    assert sc.seed_pinned is None
    # Seed 0: all three survivors re-form; seed 5: one sees the crash only at the group
    # timeout and the other two finish without it.
    for seed, sizes in [(0, [4, 3]), (5, [4, 2])]:
        assert simulate(sc, seed)[1].world_sizes == sizes
        assert unmet_on_seed(sc, seed) == []


@pytest.mark.parametrize(("line", "message"), [
    ("seed_pinned: ' '", "seed_pinned: expected the reason the seed is pinned"),
    ("expect: {final_world_size_between: [3, 2]}",
     "expect.final_world_size_between: expected [low, high] with low <= high"),
])
def test_seed_claims_are_checked(tmp_path: Path, line: str, message: str) -> None:
    sc = tmp_path / "sc.yaml"
    sc.write_text(f"protocol: {{name: static}}\ncluster: {{hosts: 2}}\n{line}\n")
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(sc)
