"""Verdicts as JUnit XML, the format CI systems show as test results.

Every run is a ``<testsuite>`` (its ``system-out``: where its report is); each of its checks
and expectations is a ``<testcase>``, failed with the violation's witness or the expected
and actual values; a check that examined nothing, or that the run's events cannot judge,
is ``<skipped>`` with why (n/a is neither a pass nor a failure). A check the scenario
lists in ``expect.violated_checks`` (an upstream bug it shows on purpose) passes, with a note.
An exploration is one suite with a test case per check, failed by the distinct violations
the search found for it, each with its reproducer.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_sim.trace import encode

if TYPE_CHECKING:
    from elastic_sim.checks import Check
    from elastic_sim.explore import Exploration
    from elastic_sim.pipeline import RunReport


@dataclass
class Case:
    """One test case: its name, and why it failed (``None``: it passed) or was skipped."""

    name: str
    classname: str
    failure: str | None = None
    details: str = ""
    note: str = ""
    skipped: str | None = None
    """Why it was not judged (a check with nothing to examine, or one the run's events
    cannot judge): neither a pass nor a failure."""
    time_s: float = 0.0


@dataclass
class Suite:
    """One run's (or one search's) test cases."""

    name: str
    time_s: float
    cases: list[Case] = field(default_factory=list)
    out: str = ""
    """Where to look next (the run's report), for the suite's ``system-out``."""


def run_suite(report: RunReport) -> Suite:
    """The checks and expectations of one run."""
    label = f"{report.scenario.name}-{report.mode}-s{report.seed}"
    cls = f"elastic_sim.{report.scenario.name}.{report.mode}.s{report.seed}"
    known = set(report.scenario.expect.known_violations())
    suite = Suite(label, report.wall_s, out=where(report.out_dir, report.report_files))
    for c in report.checks:
        case = Case(f"check {c.name}", cls, time_s=c.seconds)
        if c.status == "n/a":
            case.skipped = c.examined
        elif c.violations and c.name in known:
            case.note = (f"expected violation (expect.violated_checks or may_violate): "
                         f"{c.violations[0].message}")
        elif c.violations:
            case.failure = c.violations[0].message
            case.details = "\n\n".join(
                v.message + "\n" + "\n".join(encode(e) for e in v.witness)
                for v in c.violations)
        suite.cases.append(case)
    for e in report.expectations:
        case = Case(f"expect {e.name}", cls)
        if not e.ok:
            case.failure = f"expected {e.expected}, got {e.actual}"
        suite.cases.append(case)
    return suite


def where(out_dir: Path, report_files: Sequence[Path] = ()) -> str:
    """The line a CI log shows to find a run: its report, else its directory."""
    return f"report: {report_files[0]}" if report_files else f"run: {out_dir}"


def explore_suite(res: Exploration, checks: Sequence[Check], fail_on: str = "any") -> Suite:
    """A search: a test case per check, failed by the violations found of it that fail
    the campaign (``fail_on``: ``promise``, only where the protocol broke its own promise;
    the others are noted)."""
    suite = Suite(f"explore-{res.scenario}-s{res.seed}", res.wall_s)
    cls = f"elastic_sim.explore.{res.scenario}.s{res.seed}"
    for check in checks:
        name = check.__name__
        case = Case(f"check {name}", cls)
        found = [f for f in res.findings if f.signature.check == name]
        failing = [f for f in res.failing(fail_on) if f.signature.check == name]
        if name in res.ignored:
            case.note = "ignored (known violation)"
        elif failing:
            case.failure = f"{len(failing)} distinct violation(s); first: {failing[0].message}"
            case.details = "\n".join(f"{f.signature}: {f.message} -> {f.reproducer}"
                                     for f in found)
        elif found:
            case.note = "\n".join(f"{f.standing}: {f.signature}: {f.message} -> "
                                  f"{f.reproducer}" for f in found)
        suite.cases.append(case)
    return suite


def junit_xml(suites: Iterable[Suite]) -> ET.Element:
    """The ``<testsuites>`` document."""
    root = ET.Element("testsuites", name="elastic-sim")
    totals = [0, 0, 0.0]
    for s in suites:
        failures = sum(c.failure is not None for c in s.cases)
        skipped = sum(c.skipped is not None for c in s.cases)
        el = ET.SubElement(root, "testsuite", name=s.name, tests=str(len(s.cases)),
                           failures=str(failures), errors="0", skipped=str(skipped),
                           time=f"{s.time_s:.3f}")
        for c in s.cases:
            tc = ET.SubElement(el, "testcase", name=c.name, classname=c.classname,
                               time=f"{c.time_s:.6f}")
            if c.skipped is not None:
                ET.SubElement(tc, "skipped", message=c.skipped)
            if c.failure is not None:
                fail = ET.SubElement(tc, "failure", message=c.failure, type="violation")
                fail.text = c.details or c.failure
            if c.note:
                ET.SubElement(tc, "system-out").text = c.note
        if s.out:
            ET.SubElement(el, "system-out").text = s.out
        totals[0] += len(s.cases)
        totals[1] += failures
        totals[2] += s.time_s
    root.set("tests", str(totals[0]))
    root.set("failures", str(totals[1]))
    root.set("errors", "0")
    root.set("time", f"{totals[2]:.3f}")
    return root


def write_junit(path: Path, suites: Iterable[Suite]) -> None:
    """Write the suites to ``path`` as JUnit XML (complete or not at all)."""
    tree = ET.ElementTree(junit_xml(suites))
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
