"""Yield points (``elastic_sim.protocols.api.yield_point``): where upstream releases the GIL or a
lock between two steps, another thread can run in between. The model yields to the scheduler
there, so under ``--ties`` (a tie seed) work due at the same instant in another lane can
come between the two steps; without the yield the two steps are atomic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime, yield_point
from elastic_sim.sim.run import run
from elastic_sim.trace import TraceEvent
from tests.sim.simutil import make_world

M = "tests.sim.test_yield_points"


async def _other(rt: Runtime) -> None:
    await rt.sleep(1.0)
    rt.record("step", n="other")  # e.g. the keep-alive thread, due at the same instant


async def read_then_act(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Read, (yield,) act, as the agent after num_nodes_waiting() or Horovod's driver
    after update_available_hosts(); a second task of the process is due then too."""
    rt.spawn(_other(rt), "other")
    await rt.sleep(1.0)
    rt.record("step", n="read")
    if args["yield"]:
        await yield_point(rt, "the line it models")
    rt.record("step", n="act")
    await rt.sleep(1.0)
    return 0


def _order(with_yield: bool, tie_seed: int | None) -> list[str]:
    events: list[TraceEvent] = []
    world = make_world(f"{M}:read_then_act", hosts=("h0",), args={"yield": with_yield})
    run(world, (), 0, events.append, tie_seed=tie_seed)
    return [str(e.get("n")) for e in events if e.kind == "step"]


def test_ties_reach_both_orders_around_a_yield_point() -> None:
    orders = {tuple(_order(True, seed)) for seed in range(40)}
    assert ("read", "other", "act") in orders  # the other thread ran in the gap
    assert ("read", "act", "other") in orders


def test_without_the_yield_point_nothing_comes_between_the_two_steps() -> None:
    orders = {tuple(_order(False, seed)) for seed in range(40)}
    assert ("read", "other", "act") not in orders
    assert orders >= {("read", "act", "other"), ("other", "read", "act")}


def test_without_ties_a_yield_point_runs_what_else_is_due_first() -> None:
    # FIFO (no tie seed): the continuation goes after what is already due at this instant
    assert _order(True, None) in (["read", "other", "act"], ["other", "read", "act"])
