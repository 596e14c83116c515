"""Shared fixtures and paths of the test suite.

Lanes: ``pytest -m "not real and not slow"`` is the fast lane (sim and unit tests);
``-m real`` starts real processes (serialise them: ``flock /tmp/es-real.lock``); ``-m slow``
builds wheels, runs campaigns. CI runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
"""The repository."""
SCENARIOS = ROOT / "scenarios"
"""The shipped scenarios."""


@pytest.fixture
def shipped_scenarios() -> list[Path]:
    """Every shipped scenario file, sorted."""
    return sorted(SCENARIOS.rglob("*.yaml"))


@pytest.fixture
def write_scenario(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``write_scenario(text, name="s")`` -> the path of a scenario file holding ``text``."""

    def write(text: str, name: str = "s") -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return write
