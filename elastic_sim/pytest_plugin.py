"""A pytest plugin: scenario files as test items, when asked.

``pytest --elastic-sim scenarios/`` collects every ``*.yaml`` scenario under the paths given
(a built-in scenario's name, ``pytest --elastic-sim scale_down``, stands for its file) and
runs each in the sim (``--elastic-sim-seeds 1-5``: once per seed; default: the scenario's
seed). An item passes when every check and expectation holds, as ``elastic-sim run`` exits
0; a variant broken on purpose (its ``demo.breaks`` names the checks it shows failing) is an
expected failure (xfail) exactly while those checks, and nothing else, fail; a bad scenario
file fails its item with the one-line message naming the field. Without ``--elastic-sim``
the plugin collects nothing. Installed with elastic-sim (entry point ``pytest11``); run
outputs go to pytest's temporary directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

OPTION = "--elastic-sim"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--elastic-sim`` and ``--elastic-sim-seeds``."""
    group = parser.getgroup("elastic-sim", "elastic-sim scenarios as tests")
    group.addoption(OPTION, action="store_true", default=False,
                    help="collect scenario YAML files as tests, run each in the sim")
    group.addoption("--elastic-sim-seeds", default=None, metavar="SPEC",
                    help="run each scenario under these seeds (1-5, 1,7); default: its own")


def pytest_configure(config: pytest.Config) -> None:
    """With ``--elastic-sim``, an argument that is no path but a built-in scenario's name
    (``scale_down``, ``torchelastic/worker_crash``) stands for that scenario's file."""
    if not config.getoption(OPTION):
        return
    from elastic_sim.builtin import builtin_dir

    root = builtin_dir()
    for i, arg in enumerate(config.args):
        name, sep, rest = arg.partition("::")
        if Path(name).exists() or ".." in Path(name).parts or Path(name).is_absolute():
            continue
        found = root / f"{name.removesuffix('.yaml')}.yaml"
        if found.is_file():
            config.args[i] = str(found) + sep + rest


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A scenario file, when ``--elastic-sim`` is given."""
    if parent.config.getoption(OPTION) and file_path.suffix in (".yaml", ".yml"):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    """One scenario file: an item per seed."""

    def collect(self) -> Iterator[pytest.Item]:
        """An item per seed to run (one when the file does not load: it fails)."""
        from elastic_sim.errors import ScenarioError
        from elastic_sim.scenario import load_scenario
        from elastic_sim.sweep import parse_seeds

        spec = self.config.getoption("--elastic-sim-seeds")
        try:
            seeds: list[int | None] = ([None] if spec is None
                                       else list(parse_seeds(spec, "--elastic-sim-seeds")))
            sc = load_scenario(self.path)
        except ScenarioError as exc:
            yield ScenarioItem.from_parent(self, name="invalid", seed=None, error=str(exc))
            return
        for seed in seeds:
            yield ScenarioItem.from_parent(self, name=f"s{sc.seed if seed is None else seed}",
                                           seed=seed, error=None)


class ScenarioFailed(Exception):
    """A scenario's checks or expectations did not hold, or its file is bad."""


class ScenarioItem(pytest.Item):
    """One scenario under one seed, run in the sim."""

    def __init__(self, *, seed: int | None, error: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed
        self.error = error

    def runtest(self) -> None:
        """Run it; :class:`ScenarioFailed` with what did not hold."""
        if self.error is not None:
            raise ScenarioFailed(self.error)
        from elastic_sim.junit import run_suite
        from elastic_sim.pipeline import execute
        from elastic_sim.spec import compile_spec

        spec = compile_spec(self.path, seed=self.seed)
        tmp = self.config._tmp_path_factory.mktemp(  # type: ignore[attr-defined]
            f"{spec.scenario.name}-s{spec.seed}")
        report = execute(spec, Path(tmp))
        lines = [f"{c.name}: {c.failure}" for c in run_suite(report).cases
                 if c.failure is not None]
        demo = spec.scenario.demo
        if demo is not None:
            shown = {c.name.removeprefix("check ") for c in run_suite(report).cases
                     if c.failure is not None}
            if shown == set(demo.breaks):
                pytest.xfail(f"broken on purpose: {', '.join(demo.breaks)} caught it")
            lines.insert(0, f"a variant broken on purpose to show {', '.join(demo.breaks)} "
                            f"failing: {', '.join(sorted(shown)) or 'nothing'} failed")
            raise ScenarioFailed("\n".join([*lines, f"run: {report.out_dir}"]))
        if not report.passed:
            raise ScenarioFailed("\n".join([*lines, f"run: {report.out_dir}"]))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        """The scenario's failures, without a Python traceback."""
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        """Where the item comes from, for pytest's report lines."""
        return self.path, 0, f"scenario {self.path.name} [{self.name}]"
