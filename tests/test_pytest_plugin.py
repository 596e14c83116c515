"""The pytest plugin: ``pytest --elastic-sim DIR`` collects scenario files as test items and
runs each in the sim; without the option it collects nothing."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import SCENARIOS

PLUGIN = ["-p", "elastic_sim.pytest_plugin"]  # also an installed entry point (pytest11)


@pytest.fixture
def scenario_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with two shipped scenarios (one deliberately broken) and a bad file."""
    d = pytester.mkdir("scenarios")
    shutil.copy(SCENARIOS / "scale_down.yaml", d / "scale_down.yaml")
    shutil.copy(SCENARIOS / "broken_skip_sync.yaml", d / "broken_skip_sync.yaml")
    (d / "typo.yaml").write_text("protocol: {name: statc}\ncluster: {hosts: 2}\n")
    return pytester


def test_collects_and_runs_a_scenario_directory(scenario_dir: pytest.Pytester) -> None:
    res = scenario_dir.runpytest(*PLUGIN, "--elastic-sim", "scenarios", "-v", "-rx")
    res.assert_outcomes(passed=1, failed=1, xfailed=1)
    out = res.stdout.str()
    res.stdout.fnmatch_lines([
        "*scenarios/broken_skip_sync.yaml::s0 XFAIL*",
        "*scenarios/scale_down.yaml::s0 PASSED*",
        "*scenarios/typo.yaml::invalid FAILED*",
    ])
    assert "broken on purpose: state_agreement caught it" in out
    assert "protocol.name: unknown protocol 'statc'" in out
    assert "Traceback" not in out


def test_seeds_option_makes_an_item_per_seed(scenario_dir: pytest.Pytester) -> None:
    res = scenario_dir.runpytest(*PLUGIN, "--elastic-sim", "--elastic-sim-seeds", "1-3",
                                 "scenarios/scale_down.yaml", "--collect-only", "-q")
    res.stdout.fnmatch_lines(["scenarios/scale_down.yaml::s1", "scenarios/scale_down.yaml::s2",
                              "scenarios/scale_down.yaml::s3"])


def test_without_the_option_it_collects_nothing(scenario_dir: pytest.Pytester) -> None:
    res = scenario_dir.runpytest(*PLUGIN, "scenarios")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_built_in_scenario_s_name_stands_for_its_file(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest(*PLUGIN, "--elastic-sim", "scale_down", "torchelastic/worker_crash",
                             "broken_skip_sync")
    res.assert_outcomes(passed=2, xfailed=1)


def test_the_shipped_folder_is_green(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest(*PLUGIN, "--elastic-sim", str(SCENARIOS), "-q", "-n", "2")
    outcomes = res.parseoutcomes()
    assert "failed" not in outcomes and outcomes["passed"] >= 60 and outcomes["xfailed"] >= 7


def test_a_tightened_expectation_is_red(pytester: pytest.Pytester) -> None:
    text = (SCENARIOS / "scale_down.yaml").read_text()
    assert "max_lost_steps: 10" in text
    pytester.makefile(".yaml", tight=text.replace("max_lost_steps: 10", "max_lost_steps: 0"))
    res = pytester.runpytest(*PLUGIN, "--elastic-sim", "tight.yaml")
    res.assert_outcomes(failed=1)
    assert "expect max_lost_steps: expected <= 0, got 5" in res.stdout.str()


def test_a_demo_whose_check_no_longer_fails_is_red(pytester: pytest.Pytester) -> None:
    text = (SCENARIOS / "broken_skip_sync.yaml").read_text()
    pytester.makefile(".yaml", mended=text.replace("skip_state_broadcast: true",
                                                   "skip_state_broadcast: false"))
    res = pytester.runpytest(*PLUGIN, "--elastic-sim", "mended.yaml")
    res.assert_outcomes(failed=1)
    assert "broken on purpose to show state_agreement failing: nothing failed" in \
        res.stdout.str()
