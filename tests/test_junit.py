"""``--junit FILE`` on run, sweep and explore: JUnit XML that a JUnit schema accepts, a test
case per check and expectation per run, failed exactly where the run failed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from elastic_sim.checks import CHECKS
from elastic_sim.cli import main
from tests.conftest import ROOT, SCENARIOS

xmlschema = pytest.importorskip("xmlschema", reason="xmlschema is in the test extra")
XSD = ROOT / "tests" / "data" / "junit.xsd"


def _valid(path: Path) -> ET.Element:
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    return ET.parse(path).getroot()


def _cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {tc.get("name", ""): tc for tc in suite.iter("testcase")}


def test_the_schema_check_is_strict(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x"><testcase name="a"/></testsuite>'
                   "</testsuites>")  # a testsuite without its required tests= count
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        _valid(bad)


def test_a_passing_run_is_a_suite_of_passing_checks_and_expectations(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    assert main(["run", str(SCENARIOS / "scale_down.yaml"), "--out", str(tmp_path / "o"),
                 "--quiet", "--no-report", "--junit", str(junit)]) == 0
    root = _valid(junit)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "scale_down-sim-s0" and suite.get("failures") == "0"
    cases = _cases(suite)
    assert {f"check {c.__name__}" for c in CHECKS} <= set(cases)
    assert {"expect outcome", "expect max_recovery_s", "expect max_lost_steps"} <= set(cases)
    assert int(suite.get("tests", "")) == len(cases) == int(root.get("tests", ""))
    assert not list(root.iter("failure"))


def test_a_violation_fails_its_check_case_with_the_witness(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    assert main(["run", str(SCENARIOS / "broken_skip_sync.yaml"), "--out",
                 str(tmp_path / "o"), "--quiet", "--no-report", "--junit", str(junit)]) == 1
    root = _valid(junit)
    failed = {tc.get("name"): tc.find("failure") for tc in root.iter("testcase")
              if tc.find("failure") is not None}
    assert "check state_agreement" in failed
    fail = failed["check state_agreement"]
    assert fail is not None and fail.get("type") == "violation"
    assert '"kind"' in (fail.text or "")  # witness events, one JSON line each
    assert root.get("failures") == str(len(failed))


def test_a_known_upstream_violation_passes_with_a_note(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    assert main(["run", str(SCENARIOS / "torchelastic" / "rank0_host_crash.yaml"), "--out",
                 str(tmp_path / "o"), "--quiet", "--no-report", "--junit", str(junit)]) == 0
    cases = _cases(_valid(junit).findall("testsuite")[0])
    case = cases["check master_agreement"]
    assert case.find("failure") is None
    note = case.find("system-out")
    assert note is not None and "expected violation" in (note.text or "")


def test_a_sweep_is_a_suite_per_seed(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    main(["sweep", str(SCENARIOS / "scale_down.yaml"), "--seeds", "0-2", "--out",
          str(tmp_path / "o"), "--junit", str(junit)])
    suites = _valid(junit).findall("testsuite")
    assert [s.get("name") for s in suites] == [f"scale_down-sim-s{i}" for i in range(3)]


def test_explore_is_a_case_per_check_failed_by_its_findings(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    rc = main(["explore", str(SCENARIOS / "broken_skip_sync.yaml"), "--budget", "3",
               "--out", str(tmp_path / "o"), "--junit", str(junit)])
    assert rc == 1
    (suite,) = _valid(junit).findall("testsuite")
    cases = _cases(suite)
    assert set(cases) == {f"check {c.__name__}" for c in CHECKS}
    fail = cases["check state_agreement"].find("failure")
    assert fail is not None and ".yaml" in (fail.text or "")  # names the reproducer


def test_a_sweep_s_n_a_checks_are_skipped_with_why_and_each_suite_names_its_run(
        tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    out = tmp_path / "o"
    assert main(["sweep", "scale_down", "--seeds", "0-1", "--out", str(out),
                 "--junit", str(junit)]) == 0
    for suite, seed in zip(_valid(junit).findall("testsuite"), (0, 1), strict=True):
        summary = json.loads((out / f"scale_down-sim-s{seed}" / "summary.json").read_text())
        na = {f"check {c['name']}": c["examined"] for c in summary["checks"]
              if c["status"] == "n/a"}
        assert na  # the static protocol has no exit barrier, no blacklist...
        skipped = {tc.get("name"): tc.find("skipped") for tc in suite.iter("testcase")
                   if tc.find("skipped") is not None}
        assert {name: el.get("message") for name, el in skipped.items()} == na
        assert suite.get("skipped") == str(len(na)) and suite.get("failures") == "0"
        assert suite.findtext("system-out") == f"run: {out / f'scale_down-sim-s{seed}'}"


def test_a_check_s_case_takes_the_time_the_check_took(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    assert main(["run", "scale_down", "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                 "--junit", str(junit)]) == 0
    times = {tc.get("name"): float(tc.get("time", "")) for tc in _valid(junit).iter("testcase")}
    checks = [t for name, t in times.items() if name and name.startswith("check ")]
    assert len(checks) == len(CHECKS) and all(t >= 0 for t in checks) and sum(checks) > 0
