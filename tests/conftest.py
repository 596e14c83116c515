"""Shared fixtures and paths of the test suite.

Lanes: ``pytest -m "not real and not slow"`` is the fast lane (sim and unit tests);
``-m real`` starts real processes (serialise them: ``flock /tmp/es-real.lock``); ``-m slow``
builds wheels, runs campaigns. CI runs everything, on pytest-xdist workers (``-n auto
--dist loadgroup``): the real-mode tests all go to one worker, one after another, since they
start process trees and measure time.
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with ``--dist loadgroup``, every ``real`` test runs on one
    worker, one after another (see the module)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("real") is not None:
            item.add_marker(pytest.mark.xdist_group("real"))


def pytest_configure(config: pytest.Config) -> None:
    """Let the Ctrl-C tests' children see SIGINT. A shell starts a background job (`cmd &`)
    with SIGINT ignored, every process it starts inherits that across exec, and Python then
    never installs its KeyboardInterrupt handler: the launcher under test would ignore the
    test's Ctrl-C. A handled signal resets to the default in an exec'ed child, so handling
    it here (as Python's own default does) gives the children a normal SIGINT."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
