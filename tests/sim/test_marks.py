"""``TracedGroup.train``'s marks: what a member does at some steps' ends (a checkpoint
sent) happens at the same instants, with the same state, in the fast sim (a stretch that
runs on through its marks) as step by step; a mark that raises fails that member's
``train`` there and then, and the others go on as they would."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.faults.model import CrashHost, HangHost
from elastic_sim.protocols.api import CollectiveError, Runtime
from elastic_sim.trace import STRETCH, TraceEvent, encode, expand_stretches
from tests.sim.simutil import group_of_hosts, make_world, simulate

M = "tests.sim.test_marks"


class Boom(Exception):
    """A mark's own error."""


async def train_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rank = int(rt.host[1:])
    g = await group_of_hosts(rt, len(args["hosts"]), 5.0)
    state = [0.0]

    def grads(i: int) -> list[float]:
        return [float(i + rank)]

    def apply(i: int, summed: list[float]) -> None:
        state[0] += summed[0]

    def mark(i: int) -> None:
        rt.record("mark", i=i, state=state[0])
        rt.send("h0/main", {"i": i, "state": state[0]})
        if rt.host == args.get("boom_host") and i == args.get("boom_at"):
            raise Boom(f"mark {i}")

    marks = list(range(args["every"] - 1, args["steps"], args["every"]))
    try:
        await g.train(args["steps"], 0.1, grads, apply, 1, marks=marks, at_mark=mark,
                      round=0)
    except Boom as exc:
        rt.record("boom", error=str(exc), seq=g.seq)
        try:  # the group goes on being numbered as it would after that step
            await g.allreduce([1.0])
        except CollectiveError as err:
            rt.record("after", error=type(err).__name__)
        return 1
    except CollectiveError as err:
        rt.record("failed", error=type(err).__name__, state=state[0], seq=g.seq)
        return 2
    rt.record("done", state=state[0], seq=g.seq)
    return 0


def _run(fidelity: str, faults: list[Any], **args: Any) -> list[TraceEvent]:
    hosts = ["h0", "h1", "h2"]
    world = make_world(f"{M}:train_main", hosts,
                       {"hosts": hosts, "steps": 40, "every": 10, **args}, time_limit=60.0)
    _, events = simulate(dataclasses.replace(world, fidelity=fidelity), faults)
    return events


def _same(faults: list[Any], **args: Any) -> list[TraceEvent]:
    fast, fine = _run("fast", faults, **args), _run("fine", faults, **args)
    assert not any(e.kind == STRETCH for e in fine)
    expanded = list(expand_stretches(fast))

    def key(events: list[TraceEvent]) -> list[tuple[float, str, str, str, str]]:
        return sorted((e.t, e.host, e.proc, e.kind, encode(e)) for e in events)

    assert key(expanded) == key(fine)
    return fast


def test_a_stretch_runs_on_through_its_marks() -> None:
    fast = _same([])
    assert sum(e.kind == STRETCH for e in fast) == 3 * 4  # a summary per member per mark
    marks = [e for e in fast if e.kind == "mark"]
    assert [e.data["i"] for e in marks] == [i for i in (9, 19, 29, 39) for _ in range(3)]
    assert all(e.kind != "failed" for e in fast)


@pytest.mark.parametrize("at", [2.0, 2.1017, 3.5, 4.0])
def test_a_fault_among_the_marks_leaves_them_where_the_fine_run_has_them(at: float) -> None:
    _same([CrashHost(id="c", at=at, host="h2")])
    _same([HangHost(id="h", at=at, host="h1", duration=1.5)])


@pytest.mark.parametrize("host,boom_at", [("h1", 9), ("h0", 19), ("h2", 39)])
def test_a_mark_that_raises_fails_its_members_train_there(host: str, boom_at: int) -> None:
    fast = _same([], boom_host=host, boom_at=boom_at)
    boom = [e for e in fast if e.kind == "boom"]
    assert [(e.proc, e.data["seq"]) for e in boom] == [(f"{host}/main", 1 + boom_at + 1)]
