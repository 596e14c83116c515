"""The reset barrier keeps threading.Barrier's semantics, observed in a one-host sim: the
last arriver runs the action, reset breaks filling waiters, a reset while draining lets
the released parties pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.horovod.registry import Barrier, BrokenBarrier
from tests.sim.simutil import make_world, one, simulate

M = "tests.protocols.horovod.test_barrier"


async def _party(rt: Runtime, barrier: Barrier, tag: str, out: list[str]) -> None:
    try:
        await barrier.wait()
        out.append(f"{tag}:passed")
    except BrokenBarrier:
        out.append(f"{tag}:broken")


async def reset_while_filling_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    out: list[str] = []

    async def action() -> None:
        out.append("action")

    barrier = Barrier(rt, 2, action)
    a = rt.spawn(_party(rt, barrier, "a", out))
    await rt.sleep(1.0)
    await barrier.reset()
    await a
    rt.record("order", order=out)
    return 0


async def reset_while_draining_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    out: list[str] = []
    barrier: Barrier

    async def action() -> None:
        # a reset queued behind the last arriver, ahead of the released party
        out.append("action")
        rt.spawn(barrier.reset())

    barrier = Barrier(rt, 2, action)
    a = rt.spawn(_party(rt, barrier, "a", out))
    await rt.sleep(1.0)
    b = rt.spawn(_party(rt, barrier, "b", out))
    await a
    await b
    rt.record("order", order=out)
    return 0


def order(entry: str) -> list[str]:
    res, ev = simulate(make_world(f"{M}:{entry}", ["h0"]))
    assert res.exit_codes == {"h0/main": 0}
    out: list[str] = one(ev, "order").data["order"]
    return out


def test_a_reset_breaks_a_filling_barrier() -> None:
    assert order("reset_while_filling_main") == ["a:broken"]


def test_a_reset_while_draining_lets_the_released_parties_pass() -> None:
    assert sorted(order("reset_while_draining_main")) == ["a:passed", "action", "b:passed"]
