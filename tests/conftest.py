"""Shared fixtures and paths of the test suite.

Lanes: ``pytest -m "not real and not slow"`` is the fast lane (sim and unit tests);
``-m real`` starts real processes; ``-m slow`` builds wheels, runs campaigns. CI runs
everything, on pytest-xdist workers (``-n logical --dist loadgroup``): the real-mode tests
all go to one worker, one after another, since they start process trees, check for leftover
processes by name and measure time. Each also holds a lock on ``REAL_LOCK`` while it runs,
so real tests never overlap, whatever the scheduler does and across pytest runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
"""The repository."""
SCENARIOS = ROOT / "scenarios"
"""The shipped scenarios."""
REAL_LOCK = Path(os.environ.get("ELASTIC_SIM_TEST_REAL_LOCK")
                 or Path(tempfile.gettempdir()) / "elastic-sim-real-tests.lock")
"""Held by each ``real`` test while it runs (see ``_one_real_test_at_a_time``); the
environment variable moves it (tests/test_real_lane.py runs suites of its own)."""


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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with ``--dist loadgroup``, every ``real`` test runs on one
    worker, one after another (see the module). Runs before xdist's own hook, which reads
    the group markers."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("real") is not None:
            item.add_marker(pytest.mark.xdist_group("real"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Name each grouped test's group in its node id, before the xdist worker reports the
    ids to the scheduler. xdist 3.8 writes the suffix into ``item._nodeid``, which pytest
    9.2 no longer reads (ids live in ``item._id``): the scheduler then saw no groups and ran
    the real tests side by side, where one test's leftover-process check saw another's
    processes. Where xdist's own suffix took, this does nothing."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest whose ids are the strings xdist rewrites
        return
    for item in session.items:
        names = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture(autouse=True)
def _one_real_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """A ``real`` test holds an exclusive lock on ``REAL_LOCK`` while it runs: real tests
    start process trees, bind ports, check for leftover processes by name and measure time,
    so two at once (on two xdist workers, or from two pytest runs on one machine) disturb
    each other. Scheduling groups them on one worker already; this holds whatever the
    scheduler does."""
    if request.node.get_closest_marker("real") is None:
        yield
        return
    import fcntl

    with open(REAL_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pytest_configure(config: pytest.Config) -> None:
    """Let the Ctrl-C tests' children see SIGINT. A shell starts a background job (`cmd &`)
    with SIGINT ignored, every process it starts inherits that across exec, and Python then
    never installs its KeyboardInterrupt handler: the launcher under test would ignore the
    test's Ctrl-C. A handled signal resets to the default in an exec'ed child, so handling
    it here (as Python's own default does) gives the children a normal SIGINT."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
