"""The fault vocabulary is one table: every fault type has one class, and each runtime
either injects it or refuses it with a reason. What fired is read from the trace alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.backends import BACKENDS
from elastic_sim.faults.model import FAULT_TYPES, Fault, Refusal, handler_for
from elastic_sim.faults.record import FaultLedger
from elastic_sim.pipeline import simulate
from elastic_sim.real.faults.injector import Injector, real_handler
from elastic_sim.real.supervisor.tracefile import TraceFile
from elastic_sim.scenario import parse_scenario
from elastic_sim.sim.faults import sim_handler
from tests.faults.test_fault_schema import EXAMPLES, head_for

ALL = sorted(FAULT_TYPES)


def test_every_fault_type_has_an_example_scenario_entry() -> None:
    assert sorted(EXAMPLES) == ALL


@pytest.mark.parametrize("kind", ALL)
def test_each_backend_has_a_handler_or_a_reason_for_every_type(kind: str) -> None:
    cls = FAULT_TYPES[kind]
    assert len(BACKENDS) >= 3
    for b in BACKENDS.values():
        handler = handler_for(b.fault_table(), cls)
        assert handler is not None, (b.name, kind)
        if isinstance(handler, Refusal):
            assert len(handler.reason) > 20, (kind, handler.reason)
        else:
            assert callable(handler)


def _example(kind: str) -> Fault:
    sc = parse_scenario(yaml.safe_load(head_for(kind) + f"  - {EXAMPLES[kind]}\n"))
    (fault,) = sc.fault_objects()
    return fault


@pytest.mark.parametrize("kind", ALL)
def test_the_sim_injects_every_type_or_says_why_not_in_the_trace(kind: str) -> None:
    sc = parse_scenario(yaml.safe_load(head_for(kind) + f"  - {EXAMPLES[kind]}\n"))
    events, _, result = simulate(sc, 0)
    mine = [e for e in events if e.kind == "fault" and e.get("id") == f"f0-{kind}"]
    assert mine, f"{kind}: no fault event"
    first = mine[0]
    assert first.get("type") == kind
    handler = sim_handler(FAULT_TYPES[kind])
    if isinstance(handler, Refusal):
        assert first.get("phase") == "skipped" and first.get("reason") == handler.reason
    else:
        assert first.get("phase") in ("start", "skipped")
        if first.get("phase") == "skipped":
            assert first.get("reason")
    (rep,) = result.faults
    assert rep.fired == (first.get("phase") == "start")
    assert rep.at == (first.t if rep.fired else None)
    assert rep.reason == ("" if rep.fired else first.get("reason"))


class _Targets:
    """Every signal lands; every cut loads (no processes, no namespace)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def signal_host(self, host: str, sig: int) -> bool:
        self.calls.append((host, sig))
        return True

    def signal_proc(self, name: str, sig: int) -> str:
        self.calls.append((name, sig))
        return ""

    def start_fault(self, fault: Any) -> str:
        self.calls.append(("start", fault.id))
        return ""

    def signal_role(self, host: str, to: str, sig: int) -> str:
        self.calls.append((f"{host}:{to}", sig))
        return ""

    def cut(self, fault: Any) -> str:
        self.calls.append(("cut", fault.id))
        return ""

    def heal(self, fault: Any) -> str:
        self.calls.append(("heal", fault.id))
        return ""

    def reset(self, fault: Any) -> tuple[str, int]:
        self.calls.append(("reset", fault.id))
        return "", 1


@pytest.mark.parametrize("kind", [k for k in ALL
                                  if not isinstance(real_handler(FAULT_TYPES[k]), Refusal)])
def test_real_mode_injects_every_type_it_does_not_refuse(tmp_path: Path, kind: str) -> None:
    fault = _example(kind)
    targets = _Targets()
    trace = TraceFile(tmp_path / "trace.jsonl")
    injector = Injector([fault], targets, trace, lambda: 1.0)
    injector.fire_due(1.0)  # every example is due at 1 s
    assert targets.calls, kind
    (rep,) = injector.reports(10.0)
    assert rep.fired and rep.at == 1.0, rep


def test_a_report_is_read_from_the_trace_alone() -> None:
    from elastic_sim.faults.model import CrashHost
    from elastic_sim.faults.triggers import EventTrigger, Triggered
    from elastic_sim.trace import TraceEvent

    crash, late = CrashHost("c", 1.0, "h1"), CrashHost("late", 99.0, "h2")
    never = Triggered("t", 0.0, CrashHost("t", 0.0, "h3"), EventTrigger("step", None,
                                                                        (("step", 7),)))
    ledger = FaultLedger()
    for ev in (TraceEvent(1.5, "h1", "fault-injector", "fault",
                          {"id": "c", "phase": "start"}),
               TraceEvent(1.6, "h1", "fault-injector", "fault",
                          {"id": "c", "phase": "skipped", "reason": "again"}),
               TraceEvent(2.0, "h1", "h1/main", "fault", {"id": "late", "phase": "start"})):
        ledger.observe(ev)
    reps = {r.id: r for r in ledger.reports([crash, late, never], 10.0)}
    assert reps["c"].fired and reps["c"].at == 1.5
    assert not reps["late"].fired and reps["late"].reason == "after the run ended (at 10s)"
    assert reps["t"].reason == "its trigger step{step=7} never happened"
