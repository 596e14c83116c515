"""Polled waits that skip idle ticks (sim/ticks.py): the torchelastic agent's monitor loop
costs O(1) kernel events per rendezvous-cache period at the fast fidelity, and notices
every change at exactly the tick the fine run's loop does.

The agents here poll every 13 ms (about 75 ticks per 1 s cache period, nearly all skipped
at the fast fidelity), so a change landing inside a quiet stretch is the rule: a worker
exit, a late host's arrival, a signal, a pause, a slowdown, a wedge, a clock jump, on a
host whose clocks drift. Fast and fine must agree on every event, to the exact time.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.protocols.api import Runtime
from elastic_sim.scenario import Scenario, build_world, parse_scenario
from elastic_sim.sim.run import Simulation
from tests.sim.simutil import make_world, simulate
from tests.sim.test_fidelity import _same, _with

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 0.013


def _scenario(faults: list[dict[str, Any]], hosts: Any = None, steps: int = 120,
              interval: float = INTERVAL) -> Scenario:
    raw = yaml.safe_load((ROOT / "scenarios/torchelastic/scale_down.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["protocol"]["knobs"]["monitor_interval"] = interval
    raw["workload"]["steps"] = steps
    raw["cluster"]["hosts"] = hosts or ["h0", {"name": "h1", "clock_drift": 0.003},
                                        {"name": "h2", "clock_drift": -0.002}]
    raw["faults"] = faults
    raw.pop("expect", None)
    return parse_scenario(raw, "<ticks test>")


def _sim(sc: Scenario) -> Simulation:
    sim = Simulation(build_world(sc, sc.seed), sc.seed, lambda e: None,
                     tie_seed=sc.tie_seed)
    sim.run(sc.fault_objects())
    return sim


# Instants inside quiet stretches of the agents' monitor loops (training runs from about
# 1.15 s to 14 s; the crash at 9.05 ends it for h2), at several phases of a cache period.
AT = [3.0, 5.4321, 11.777]
CHANGES = [
    {"type": "crash_process", "proc": "h1/w0"},  # a child's exit code
    {"type": "signal", "host": "h1", "signal": "TERM", "to": "agent"},
    {"type": "signal", "host": "h1", "signal": "TERM", "to": "workers"},
    {"type": "hang", "host": "h1", "duration": 0.37},  # host paused, then resumed
    {"type": "straggler", "host": "h1", "factor": 2.7, "duration": 1.3},  # slowdown
    {"type": "wedge", "host": "h1", "activity": "main", "duration": 0.41},
    {"type": "wedge", "host": "h1", "activity": "keep-alive", "duration": 2.3},
    {"type": "clock_jump", "host": "h1", "delta": 5.0},
    {"type": "partition", "groups": [["h0", "h2"], ["h1"]], "duration": 0.8},
]


@pytest.mark.parametrize("at", AT)
@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f["type"] + "-" + f.get("to", ""))
def test_a_change_in_a_quiet_stretch_is_noticed_at_the_fine_runs_tick(
        change: dict[str, Any], at: float) -> None:
    _same(_scenario([{"id": "f", "at": at, **change}]), 0)


def test_a_late_host_arrival_is_noticed_at_the_fine_runs_tick() -> None:
    """Scale-up: h3 starts mid-training and joins the wait list; the agents' monitor
    loops see it (num_nodes_waiting) at the same tick in both fidelities."""
    hosts = ["h0", {"name": "h1", "clock_drift": 0.003}, "h2",
             {"name": "h3", "start_at": 4.321, "clock_drift": -0.001}]
    sc = _scenario([], hosts=hosts)
    raw = sc.model_dump(mode="json", exclude_none=True)
    raw["protocol"]["knobs"]["max_nodes"] = 4
    _same(parse_scenario(raw, "<ticks test>"), 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fault_free_runs_agree_over_seeds(seed: int) -> None:
    _same(_scenario([]), seed)


def _quiet(hosts: int, interval: float) -> tuple[Simulation, float]:
    raw: dict[str, Any] = {
        "name": "quiet", "seed": 0, "time_limit": 3600,
        "cluster": {"hosts": hosts, "store_host": "h0"},
        "workload": {"steps": 300, "step_time": 0.1, "commit_every": 10,
                     "state_bytes": 65536},
        "faults": [],
        "protocol": {"name": "torchelastic",
                     "knobs": {"min_nodes": hosts // 2, "max_nodes": hosts,
                               "monitor_interval": interval, "last_call_timeout": 1}},
    }
    sim = _sim(parse_scenario(raw, "<quiet>"))
    return sim, sim.kernel.now


@pytest.mark.parametrize("interval", [0.1, 0.01])
def test_a_quiet_run_asks_idle_a_few_times_per_cache_period(interval: float) -> None:
    """8 agents, fault-free: the monitor loops' kernel events (ticks where idle() is
    asked, and probes) are O(1) per 1 s cache period, whatever the poll interval: at most
    3 per agent-second (a wake at the cache's expiry, the probe before it, and what the
    other tasks' steps add), where a tick per interval is 10 or 100."""
    sim, end = _quiet(8, interval)
    book = sim.ticks
    agent_seconds = 8 * end
    assert end > 30.0
    assert book.ticks > agent_seconds * 0.5  # the loop did run: one wake per cache period
    assert book.ticks + book.probes < 3 * agent_seconds


def test_the_fine_fidelity_and_a_tie_seed_ask_every_tick() -> None:
    """No skipping where every step is simulated (fine), nor with a tie seed (the order of
    same-time events is what such a run explores)."""
    sc = _scenario([])
    assert _sim(_with(sc, "fine")).ticks.ticks == 0
    assert _sim(sc.model_copy(update={"tie_seed": 3})).ticks.ticks == 0
    assert _sim(sc).ticks.ticks > 0


# -- same-time order -----------------------------------------------------------------------

M = "tests.sim.test_ticks"


async def tie_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 polls every 0.1 s until its monotonic clock reaches ``wake`` (a grid tick, read
    from the chained additions); h1 and h2 each land a callback on that exact instant,
    one scheduled before the tick before it (at 0.5 s), one after it (at 0.65 s)."""
    wake = float(args["wake"])
    if rt.host == "h0":
        await rt.poll(0.1, lambda: rt.monotonic() < wake, lambda: wake)
        rt.record("h0_woke")
        return 0
    first = 0.5 if rt.host == "h1" else 0.65
    await rt.sleep(first)
    await rt.sleep(wake - first)
    rt.record("lands", at=rt.monotonic())
    return 0


def _tie_order(fidelity: str) -> list[tuple[float, str, str]]:
    t = 0.0
    for _ in range(7):
        t = t + 0.1
    world = make_world(f"{M}:tie_main", ("h0", "h1", "h2"), {"wake": t})
    world = dataclasses.replace(world, fidelity=fidelity)
    _, events = simulate(world)
    out = [(e.t, e.host, e.kind) for e in events if e.kind in ("h0_woke", "lands")]
    assert len(out) == 3 and {e[0] for e in out} == {t}
    return out


def test_a_skipped_wait_wakes_among_same_time_events_in_the_fine_order() -> None:
    """At the instant of the waking tick, what was scheduled before the grid tick before
    it runs first and what was scheduled after runs after, as with chained sleeps."""
    fine = _tie_order("fine")
    assert [h for _, h, _ in fine] == ["h1", "h0", "h2"]
    assert _tie_order("fast") == fine
