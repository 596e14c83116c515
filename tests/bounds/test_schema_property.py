"""The scenario schema, as a property: scenarios whose numbers are drawn from the schema's
own types and ranges. A refused value exits 2 with one message naming the file and a field
path, no traceback, nothing written; an accepted scenario ends with a verdict (exit 0 or 1)
within the guards. A bounded number of examples runs by default; the slow test (``-m slow``)
runs 1,000 and writes its counts where ``ES_PROPERTY_STATS`` says."""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_sim.cli import main
from tests.bounds.schema_space import NumberField, invalid, refuses, scenario_fields, valid

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = {
    "static": ROOT / "scenarios" / "scale_down.yaml",
    "torchelastic": ROOT / "scenarios" / "torchelastic" / "worker_crash.yaml",
    "horovod": ROOT / "scenarios" / "horovod" / "single_rank_failure.yaml",
}
FIELDS = {name: scenario_fields(name) for name in TEMPLATES}
WALL_LIMIT = 10
"""--wall-limit of each run (seconds)."""
MEMORY_LIMIT = 4096
"""--memory-limit of each run (MiB)."""
STATS: Counter[str] = Counter()
PEAKS = {"wall_s": 0.0}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[NumberField, Any]]]:
    """A shipped scenario with one to three numeric fields redrawn, each from its valid or
    its invalid values."""
    protocol = draw(st.sampled_from(sorted(TEMPLATES)))
    raw = yaml.safe_load(TEMPLATES[protocol].read_text())
    fields = draw(st.lists(st.sampled_from(FIELDS[protocol]), min_size=1, max_size=3,
                           unique_by=lambda f: f.path))
    changes = []
    for f in fields:
        refused = draw(st.integers(0, 2)) == 0  # 2 in 3 values valid
        value = draw(invalid(f) if refused else valid(f))
        node = raw
        for key in f.path[:-1]:
            node = node.setdefault(key, {})
        node[f.path[-1]] = value
        changes.append((f, value))
    return raw, changes


def _check(raw: dict[str, Any], changes: list[tuple[NumberField, Any]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="es-prop-"))
    try:
        path = root / "s.yaml"
        path.write_text(yaml.safe_dump(raw))
        out = root / "out"
        err, sink = io.StringIO(), io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sink):
            rc = main(["run", str(path), "--out", str(out), "--no-report", "-q",
                       "--wall-limit", str(WALL_LIMIT), "--memory-limit", str(MEMORY_LIMIT)])
        PEAKS["wall_s"] = max(PEAKS["wall_s"], time.monotonic() - started)
        text = err.getvalue()
        assert "Traceback" not in text and "internal error" not in text, text
        refused = [f.dotted for f, v in changes if refuses(f, v)]
        STATS[f"exit {rc}"] += 1
        STATS["refused values" if refused else "accepted values"] += 1
        if rc == 2:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            assert len(lines) == 1, text
            assert lines[0].startswith(f"error: {path}: "), lines[0]
            named = lines[0].removeprefix(f"error: {path}: ").split(": ", 1)[0]
            assert named, lines[0]
            assert not out.exists(), "nothing may be written for bad input"
            if refused:
                assert any(named == p or named.startswith(p + "[") for p in refused), (
                    named, refused)
            else:
                STATS["cross-field refusals"] += 1
        else:
            assert not refused, f"accepted {refused}: exit {rc}"
            assert rc in (0, 1)
            summary = json.loads((out / "summary.json").read_text())
            assert summary["exit_code"] == rc
            STATS[f"verdict {summary['verdict']}"] += 1
            if summary.get("stopped"):
                STATS[f"stopped {summary['stopped']}"] += 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_stats(examples: int) -> None:
    where = os.environ.get("ES_PROPERTY_STATS")
    if where:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        Path(where).write_text(json.dumps({"examples": examples, **dict(sorted(STATS.items())),
                                           "max_wall_s": round(PEAKS["wall_s"], 2),
                                           "max_rss_mib": peak_kib // 1024}, indent=1) + "\n")


def test_every_numeric_field_has_a_finite_range() -> None:
    floats = [f.dotted for fs in FIELDS.values() for f in fs if f.kind is float and not f.finite]
    assert floats == []
    assert all(len(fs) > 15 for fs in FIELDS.values())


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_scenarios_from_the_schema_exit_2_or_end_with_a_verdict(
        case: tuple[dict[str, Any], list[tuple[NumberField, Any]]]) -> None:
    _check(*case)


@pytest.mark.slow
def test_a_thousand_scenarios_from_the_schema(request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("1,000 runs (minutes): ask for them with -m slow")
    STATS.clear()
    examples = 0

    wanted = int(os.environ.get("ES_PROPERTY_EXAMPLES", "1000"))

    @settings(max_examples=wanted, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def prop(case: tuple[dict[str, Any], list[tuple[NumberField, Any]]]) -> None:
        nonlocal examples
        examples += 1
        _check(*case)

    try:
        prop()
    finally:
        _write_stats(examples)
    assert examples >= wanted
