"""Reading a trace's training summaries natively (elastic_sim.history) gives what reading
their expansion step by step gives: the same metrics, check verdicts with the same
evidence, expectations and contract standing, on every shipped scenario and found/
reproducer at its own seed, at both fidelities. The normal lane runs a subset; ``-m slow``
runs them all. Also: the History's own answers (order by kind, next event after a point)
against the expanded view, on traces whose summaries interleave with other events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.checks import run_checks
from elastic_sim.checks.contracts import judge
from elastic_sim.expect import evaluate
from elastic_sim.history import History
from elastic_sim.reports.metrics import compute
from elastic_sim.runner import simulate
from elastic_sim.scenario import Scenario, load_scenario
from elastic_sim.trace import STRETCH, TraceEvent, encode, expand_stretches

ROOT = Path(__file__).resolve().parents[1]
ALL = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").rglob("*.yaml"))
QUICK = [
    "scenarios/scale_down.yaml",
    "scenarios/torchelastic/worker_crash.yaml",
    "scenarios/torchelastic/partition_heals.yaml",
    "scenarios/torchelastic/store_host_crash.yaml",
    "scenarios/horovod/hosts_added_and_removed.yaml",
    "scenarios/found/torchelastic/hot_spare_wait_list_livelock.yaml",
    "scenarios/hang_heals.yaml",
]


def _readings(sc: Scenario, raw: list[TraceEvent], events: list[TraceEvent] | History,
              end: dict[str, Any]) -> dict[str, Any]:
    """Everything summary.json reads off a trace (but the trace's own size and hash)."""
    body = events[:-1] if isinstance(events, list) else History(raw[:-1])
    m = compute(body, sc.workload.steps, end["exit_codes"], end["hung"], end["end_time"],
                sc.workload.batch_size)
    checks = run_checks(events)
    contract = judge(events, checks)
    return {
        "metrics": m.to_json(),
        "checks": [(c.name, c.ok, c.checked, c.examined,
                    [(v.message, [encode(e) for e in v.witness]) for v in c.violations])
                   for c in checks],
        "expectations": [vars(e) for e in evaluate(sc.expect, m, events, (), checks)],
        "contract": None if contract is None else (contract.broken_assumptions,
                                                   contract.standing),
    }


def _same_readings(path: str, fidelity: str) -> None:
    sc = load_scenario(ROOT / path).model_copy(update={"fidelity": fidelity})
    hist, _, result = simulate(sc, sc.seed)
    raw = hist.raw
    assert raw[-1].kind == "run_end"
    end = {"exit_codes": result.exit_codes, "hung": result.hung, "end_time": result.end_time}
    expanded = list(expand_stretches(raw))
    native = _readings(sc, raw, History(raw), end)
    stepwise = _readings(sc, raw, expanded, end)
    for key in stepwise:
        assert json.dumps(native[key], default=str) == json.dumps(stepwise[key], default=str), key
    assert History(raw).size == len(expanded)


@pytest.mark.parametrize("fidelity", ["fast", "fine"])
@pytest.mark.parametrize("path", QUICK)
def test_native_reading_equals_the_expanded_one(path: str, fidelity: str) -> None:
    _same_readings(path, fidelity)


@pytest.mark.slow
@pytest.mark.parametrize("fidelity", ["fast", "fine"])
@pytest.mark.parametrize("path", [p for p in ALL if p not in QUICK])
def test_native_reading_equals_the_expanded_one_everywhere(path: str, fidelity: str) -> None:
    _same_readings(path, fidelity)


def test_quick_subset_has_summaries_and_exists() -> None:
    for path in QUICK:
        assert path in ALL, path
    sc = load_scenario(ROOT / QUICK[1])
    assert any(ev.kind == STRETCH for ev in simulate(sc, sc.seed)[0].raw)
