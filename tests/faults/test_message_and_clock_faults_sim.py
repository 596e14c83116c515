"""Link faults lose, duplicate and reorder messages; clock faults step a host's wall clock
and leave its monotonic clock alone. Probe processes make the effects visible."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.faults.model import ClockJump, ClockSkew, Fault, LinkFault
from elastic_sim.protocols.api import OperationTimeout, Runtime
from tests.sim.simutil import make_world, of, simulate, trace_bytes

N = 200


async def talk_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 sends N numbered messages to h1 every 10 ms; h1 records what arrives."""
    if rt.host == "h0":
        for i in range(N):
            rt.send("h1/main", {"seq": i})
            await rt.sleep(0.01)
        return 0
    got = []
    while True:
        try:
            msg = await rt.recv(timeout=1.0)
        except OperationTimeout:
            break
        got.append(int(msg.body["seq"]))
    rt.record("received", seqs=got)
    return 0


def received(faults: list[Fault], seed: int = 0) -> list[int]:
    world = make_world("tests.faults.test_message_and_clock_faults_sim:talk_main")
    _, events = simulate(world, faults, seed)
    (ev,) = of(events, "received")
    return list(ev.get("seqs"))


def link(**kw: float) -> LinkFault:
    return LinkFault("l", 0.0, "h0", "h1", duration=100.0, **kw)


def test_without_link_faults_every_message_arrives_once_in_order() -> None:
    assert received([]) == list(range(N))


def test_loss_drops_about_that_share_of_messages() -> None:
    got = received([link(loss=0.3)])
    assert got == sorted(got) and len(set(got)) == len(got)
    assert 0.55 * N <= len(got) <= 0.85 * N


def test_duplication_delivers_copies() -> None:
    got = received([link(duplicate=1.0)])
    assert sorted(got) == sorted(list(range(N)) * 2)


def test_reordering_lets_messages_overtake_each_other_and_loses_none() -> None:
    got = received([link(reorder=0.05)])
    assert sorted(got) == list(range(N)) and got != list(range(N))


def test_link_faults_draw_from_the_run_seed_so_runs_repeat() -> None:
    world = make_world("tests.faults.test_message_and_clock_faults_sim:talk_main")
    fault = [link(loss=0.2, duplicate=0.2, reorder=0.03)]
    a = trace_bytes(simulate(world, fault, 5)[1])
    assert a == trace_bytes(simulate(world, fault, 5)[1])
    assert a != trace_bytes(simulate(world, fault, 6)[1])


def test_a_fault_on_another_link_leaves_this_one_alone() -> None:
    assert received([LinkFault("l", 0.0, "h0", "h2", loss=1.0, duration=100.0)]) == list(
        range(N))


async def clock_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Record the wall and monotonic clocks every second for 5 s."""
    for _ in range(5):
        await rt.sleep(1.0)
        rt.record("clock", wall=rt.now(), mono=rt.monotonic())
    return 0


def clocks(faults: list[Fault]) -> list[tuple[float, float]]:
    world = make_world("tests.faults.test_message_and_clock_faults_sim:clock_main",
                       hosts=("h0",))
    _, events = simulate(world, faults)
    return [(round(e.get("wall"), 6), round(e.get("mono"), 6)) for e in of(events, "clock")]


def test_clock_skew_offsets_the_wall_clock_while_it_lasts() -> None:
    got = clocks([ClockSkew("s", 1.5, "h0", offset=100.0, duration=2.0)])
    assert [w for w, _ in got] == [1.0, 102.0, 103.0, 4.0, 5.0]
    assert [m for _, m in got] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_clock_jump_steps_the_wall_clock_for_good() -> None:
    got = clocks([ClockJump("j", 2.5, "h0", delta=-60.0)])
    assert [w for w, _ in got] == [1.0, 2.0, -57.0, -56.0, -55.0]
    assert [m for _, m in got] == [1.0, 2.0, 3.0, 4.0, 5.0]
