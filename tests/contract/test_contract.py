"""The runtime contract (:mod:`elastic_sim.protocols.api`), the same tests on both runtimes: what a
protocol observes must not depend on where it runs, also where the contract is silent.

Each test runs one small protocol process (:mod:`tests.contract.entries`) in the sim and
for real and compares what it recorded (and its exit code) with one expected value."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.backends import BACKENDS
from elastic_sim.builtin import builtin_dir
from elastic_sim.faults.model import Fault
from elastic_sim.guards import RunGuard
from elastic_sim.scenario import load_scenario
from elastic_sim.spec import RunSpec
from elastic_sim.trace import TraceEvent
from elastic_sim.world import HostSpec, RunResult, World


def backend_params() -> list[Any]:
    """Every registered backend that runs the project's protocol code (a timed one, on
    wall-clock time, in the real lane)."""
    return [name if b.deterministic else pytest.param(name, marks=[
        pytest.mark.real,
        pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                           reason="real mode needs torch")])
        for name, b in BACKENDS.items() if b.runs_protocols]


def run_on(name: str, workdir: Path, entry: str, hosts: int = 1,
           faults: Sequence[Fault] = (), **args: Any) -> tuple[RunResult, list[TraceEvent]]:
    """Run ``entry`` of :mod:`tests.contract.entries` on ``hosts`` hosts on the backend
    called ``name``: its result and what it traced."""
    world = World(hosts=tuple(HostSpec(f"h{i}") for i in range(hosts)),
                  entry=f"tests.contract.entries:{entry}", args=args, time_limit=60.0)
    # A backend runs a spec's world, faults and seeds; the scenario is the pipeline's.
    spec = RunSpec(CARRIER, 0, BACKENDS[name], tuple(faults), world)
    events: list[TraceEvent] = []
    return BACKENDS[name].run(spec, events.append, RunGuard(), workdir), events


@pytest.fixture(params=backend_params())
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``run(entry, hosts, **args)`` -> (result, events) on each backend."""

    def run(entry: str, hosts: int = 1, faults: Sequence[Fault] = (), **args: Any
            ) -> tuple[RunResult, list[TraceEvent]]:
        return run_on(request.param, tmp_path, entry, hosts, faults, **args)

    return run


CARRIER = load_scenario(builtin_dir() / "scale_down.yaml")
"""A scenario for the specs that carry the suite's worlds (no backend reads it)."""


def observed(events: list[TraceEvent], host: str = "h1") -> list[Any]:
    (obs,) = [e for e in events if e.kind == "obs" and e.host == host]
    return list(obs.get("values"))


@pytest.mark.parametrize(("args", "code", "reason"), [
    ({"value": 0}, 0, "returned"),
    ({"value": None}, 0, "returned"),
    ({"value": 3}, 3, "returned"),
    ({"value": 256}, 0, "returned 256, truncated to 0"),
    ({"value": -1}, 255, "returned -1, truncated to 255"),
    ({"value": False}, 1, "returned False, not an exit code"),
    ({"value": True}, 1, "returned True, not an exit code"),
    ({"value": "x"}, 1, "returned 'x', not an exit code"),
    ({"exit": 4}, 4, "SystemExit"),
    ({"exit": None}, 0, "SystemExit"),
    ({"raise": True}, 1, "RuntimeError: on purpose"),
], ids=["0", "None", "3", "256", "-1", "False", "True", "str", "exit4", "exitNone", "raise"])
def test_exit_status_of_an_entry(runtime: Any, args: dict[str, Any], code: int,
                                 reason: str) -> None:
    result, events = runtime("returns", **args)
    assert result.exit_codes == {"h0/main": code}
    (ev,) = [e for e in events if e.kind == "proc_exit"]
    assert (ev.get("code"), ev.get("reason")) == (code, reason)


def test_store_values_counters_cas_delete_and_timeouts(runtime: Any) -> None:
    result, events = runtime("store_semantics", hosts=2)
    assert observed(events) == [
        "v", 2, -3, "a", "a", "b", True, False, True, False,
        "get: StoreTimeout after >= 0.3 s: True", "wait: StoreTimeout after >= 0.3 s: True"]
    assert set(result.exit_codes.values()) == {0}


def test_mailbox_order_and_receive_timeout(runtime: Any) -> None:
    _, events = runtime("mailbox", hosts=2)
    assert observed(events) == [[{"i": 0}, {"i": 1}, {"i": 2}], "OperationTimeout"]


def test_a_daemon_does_not_hold_the_run_but_its_children_do(runtime: Any) -> None:
    result, events = runtime("daemon", hosts=2)
    assert not result.hung
    # the daemon (h1/main) has no exit: it is left running when the rest is over
    assert result.exit_codes == {"h0/main": 0, "h1/c": 0}
    assert not [e for e in events if e.kind == "proc_exit" and e.proc == "h1/main"]
    (child,) = [e for e in events if e.kind == "proc_exit" and e.proc == "h1/c"]
    assert child.t >= 1.0 and result.end_time == pytest.approx(child.t, abs=0.3)
    assert result.end_time < 10.0


def test_task_cancellation(runtime: Any) -> None:
    _, events = runtime("cancellation")
    assert observed(events, "h0") == ["cleanup", "awaiting it raised Cancelled", True]


def test_a_collective_fails_when_a_peer_exits(runtime: Any) -> None:
    _, events = runtime("collective_errors", hosts=2, timeout=5.0, then="exit")
    # a dead peer is usually seen at once, rarely only at the timeout (calibration.md)
    assert observed(events, "h0")[0] in ("CollectiveFailed", "CollectiveTimeout")


def test_a_collective_times_out_when_a_peer_does_not_enter(runtime: Any) -> None:
    _, events = runtime("collective_errors", hosts=2, timeout=1.0, then="hang")
    assert observed(events, "h0") == ["CollectiveTimeout"]
