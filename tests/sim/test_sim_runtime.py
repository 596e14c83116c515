"""The sim runtime: processes, tasks, messages, pauses, signals, time limit."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_sim.faults.model import CrashHost, CrashProcess, HangHost
from elastic_sim.protocols.api import Cancelled, OperationTimeout, Runtime
from elastic_sim.protocols.sync import Event, Lock, Queue
from elastic_sim.world import HostSpec
from tests.sim.simutil import L, make_world, of, one, simulate

M = "tests.sim.test_sim_runtime"

# -- entries -------------------------------------------------------------------------------


async def ping_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        rt.send("h1/main", {"n": 1, "t": (1, 2)})
        msg = await rt.recv(timeout=5)
        rt.record("got", src=msg.src, body=dict(msg.body))
    else:
        msg = await rt.recv(timeout=5)
        rt.record("got", src=msg.src, body=dict(msg.body))
        rt.send(msg.src, {"n": msg.body["n"] + 1})
    return 0


async def codes_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    what = args["what"][rt.host]
    if what == "raise":
        raise ValueError("boom")
    if what == "none":
        return None  # type: ignore[return-value]
    if what == "sleep":
        try:
            await rt.sleep(100)
        finally:
            rt.record("finally")
    return int(what)


async def _forever(rt: Runtime, tag: str) -> None:
    try:
        await rt.sleep(1000)
    except Cancelled:
        rt.record("cancelled", tag=tag)
        raise


async def exit_cancels_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rt.spawn(_forever(rt, "a"))
    rt.spawn(_forever(rt, "b"))
    await rt.sleep(1)
    return 3


async def cancel_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    started: list[str] = []

    async def body(tag: str) -> str:
        started.append(tag)
        await _forever(rt, tag)
        return tag

    t1 = rt.spawn(body("t1"))
    t0 = rt.spawn(body("t0"))
    t0.cancel()  # before it starts: its body never runs
    await rt.sleep(1)
    t1.cancel()
    try:
        await t1
    except Cancelled:
        rt.record("t1_cancelled", done=t1.done())
    try:
        await t0
    except Cancelled:
        rt.record("t0_cancelled", started=list(started))
    try:
        await rt.wait_for(rt.sleep(10), 0.5)
    except OperationTimeout:
        rt.record("wait_for_timeout")
    got = await rt.wait_for(_value(rt, 0.25, 42), 1.0)
    rt.record("wait_for_value", value=got)
    return 0


async def _value(rt: Runtime, delay: float, v: int) -> int:
    await rt.sleep(delay)
    return v


async def sync_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    q: Queue[int] = Queue(rt)
    ev = Event(rt)
    lock = Lock(rt, "l")
    order: list[str] = []

    async def consumer() -> None:
        for _ in range(3):
            order.append(f"got{await q.get()}")
        ev.set()

    async def holder(tag: str) -> None:
        async with lock:
            order.append(f"in{tag}")
            await rt.sleep(0.1)
            order.append(f"out{tag}")

    rt.spawn(consumer())
    for i in range(3):
        q.put_nowait(i)
    await ev.wait(timeout=1)
    a = rt.spawn(holder("a"))
    b = rt.spawn(holder("b"))
    await a
    await b
    try:
        await q.get(timeout=0.5)
    except OperationTimeout:
        order.append("timeout")
    rt.record("order", order=order)
    return 0


async def tick_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        box = rt.spawn(_receiver(rt))
        for _ in range(args["ticks"]):
            await rt.sleep(0.1)
            rt.record("tick")
        await box
    else:
        await rt.sleep(0.5)
        rt.send("h0/main", {"hello": 1})
    return 0


async def _receiver(rt: Runtime) -> None:
    msg = await rt.recv(timeout=10)
    rt.record("recv", body=dict(msg.body))


async def forever_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        await rt.future()
    return 0


async def clock_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    await rt.sleep(10)
    rt.record("clock", now=rt.now(), mono=rt.monotonic(), x=rt.rng.random())
    return 0


async def child_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rt.record("child", env=rt.info.env, args=dict(args))
    mode = args["mode"]
    if mode == "handler":
        stop = Event(rt)
        rt.on_signal("TERM", stop.set)
        await stop.wait()
        rt.record("graceful")
        return 0
    if mode == "tick":
        for _ in range(30):
            await rt.sleep(0.1)
            rt.record("tick")
        return 5
    await rt.sleep(100)
    return 0


async def parent_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    results: dict[str, int] = {}
    for name, mode, sig in [("w1", "handler", "TERM"), ("w2", "plain", "TERM"),
                            ("w3", "plain", "INT"), ("w4", "plain", "KILL")]:
        p = await rt.start_process(name, f"{M}:child_main", {"mode": mode}, {"RANK": "1"})
        await rt.sleep(0.5)
        assert p.poll() is None
        p.signal(sig)
        results[name] = await p.wait()
        assert p.poll() == results[name]
    p = await rt.start_process("w5", f"{M}:child_main", {"mode": "tick"})
    await rt.sleep(0.45)
    p.signal("STOP")
    await rt.sleep(1.0)
    p.signal("CONT")
    results["w5"] = await p.wait()
    await rt.start_process("orphan", f"{M}:child_main", {"mode": "tick"})
    rt.record("codes", **results)
    await rt.sleep(100)
    return 0


# -- tests ---------------------------------------------------------------------------------


def test_message_latency_and_json_copy() -> None:
    res, ev = simulate(make_world(f"{M}:ping_main"))
    assert res.exit_codes == {"h0/main": 0, "h1/main": 0} and not res.hung
    got1 = one(ev, "got", "h1/main")
    got0 = one(ev, "got", "h0/main")
    assert got1.t == pytest.approx(2 * L, abs=1e-12)  # h0 -> switch -> h1
    assert got0.t == pytest.approx(4 * L, abs=1e-12)
    assert got1.data["body"] == {"n": 1, "t": [1, 2]}  # it went through JSON
    assert got0.data == {"src": "h1/main", "body": {"n": 2}}
    assert res.end_time == pytest.approx(4 * L)
    kinds = [e.kind for e in ev]
    assert kinds.count("proc_start") == 2 and kinds.count("proc_exit") == 2


def test_exit_codes_exception_crash_and_dead_finally() -> None:
    hosts = ["h0", "h1", "h2", "h3", "h4"]
    args = {"what": {"h0": "7", "h1": "none", "h2": "raise", "h3": "sleep", "h4": "sleep"}}
    faults = [CrashHost(id="c", at=2.0, host="h3"), CrashProcess(id="p", at=3.0, proc="h4/main")]
    res, ev = simulate(make_world(f"{M}:codes_main", hosts, args), faults)
    assert res.exit_codes == {"h0/main": 7, "h1/main": 0, "h2/main": 1, "h3/main": -9,
                              "h4/main": -9}
    assert one(ev, "proc_exit", "h2/main").data == {"code": 1, "reason": "ValueError: boom"}
    assert one(ev, "proc_exit", "h3/main").t == 2.0
    assert one(ev, "proc_exit", "h4/main").t == 3.0
    assert of(ev, "finally") == []  # a killed process's finally blocks trace nothing
    assert [r.fired for r in res.faults] == [True, True]
    assert res.end_time == 3.0


def test_exit_cancels_remaining_tasks() -> None:
    res, ev = simulate(make_world(f"{M}:exit_cancels_main", ["h0"]))
    assert res.exit_codes == {"h0/main": 3}
    tags = [(e.t, e.data["tag"]) for e in of(ev, "cancelled")]
    assert tags == [(1.0, "a"), (1.0, "b")]
    assert ev[-1].kind == "proc_exit"  # cancellation happens before the exit


def test_task_cancel_and_wait_for() -> None:
    res, ev = simulate(make_world(f"{M}:cancel_main", ["h0"]))
    assert res.exit_codes == {"h0/main": 0}
    assert one(ev, "cancelled").data == {"tag": "t1"} and one(ev, "cancelled").t == 1.0
    assert one(ev, "t1_cancelled").data == {"done": True}
    assert one(ev, "t0_cancelled").data == {"started": ["t1"]}
    assert one(ev, "wait_for_timeout").t == pytest.approx(1.5)
    v = one(ev, "wait_for_value")
    assert v.data == {"value": 42} and v.t == pytest.approx(1.75)


def test_sync_primitives_fifo() -> None:
    res, ev = simulate(make_world(f"{M}:sync_main", ["h0"]))
    assert res.exit_codes == {"h0/main": 0}
    rec = one(ev, "order")
    assert rec.data["order"] == ["got0", "got1", "got2", "ina", "outa", "inb", "outb", "timeout"]
    assert rec.t == pytest.approx(0.7)


def test_paused_host_runs_nothing_until_resume() -> None:
    world = make_world(f"{M}:tick_main", ["h0", "h1"], {"ticks": 6})
    res, ev = simulate(world, [HangHost(id="hang", at=0.35, duration=1.0, host="h0")])
    ticks = [round(e.t, 9) for e in of(ev, "tick")]
    # 0.1 0.2 0.3, then the 0.4 timer fires during the hang: run at the resume (1.35)
    assert ticks == [0.1, 0.2, 0.3, 1.35, 1.45, 1.55]
    recv = one(ev, "recv")
    assert recv.t == pytest.approx(1.35)  # the message arrived at 0.502, held until resume
    faults = [(e.t, e.data["phase"]) for e in of(ev, "fault")]
    assert faults == [(0.35, "start"), (1.35, "heal")]
    # the deferred continuations run in the order they became due
    i_recv = ev.index(recv)
    i_tick = ev.index(of(ev, "tick")[3])
    assert i_tick < i_recv
    assert res.exit_codes == {"h0/main": 0, "h1/main": 0}


def test_time_limit_is_hung() -> None:
    world = make_world(f"{M}:forever_main", ["h0", "h1"], time_limit=10.0)
    res, ev = simulate(world, [CrashHost(id="late", at=50.0, host="h1")])
    assert res.hung and res.end_time == 10.0
    assert res.exit_codes == {"h1/main": 0}
    assert not res.faults[0].fired and "after the run ended" in res.faults[0].reason
    assert all(e.t <= 10.0 for e in ev)


def test_clock_offset_drift_and_rng_stream() -> None:
    hosts = [HostSpec("h0", clock_offset=100.0, clock_drift=1e-3), HostSpec("h1", start_at=2.0)]
    _res, ev = simulate(make_world(f"{M}:clock_main", hosts))
    c0 = one(ev, "clock", "h0/main").data
    c1 = one(ev, "clock", "h1/main").data
    assert c0["now"] == pytest.approx(100.0 + 1.001 * 10.0)
    assert c0["mono"] == pytest.approx(1.001 * 10.0)
    assert c1["now"] == pytest.approx(12.0) and c1["mono"] == pytest.approx(10.0)
    assert c0["x"] != c1["x"]  # each process has its own stream
    _, ev2 = simulate(make_world(f"{M}:clock_main", hosts), seed=1)
    assert one(ev2, "clock", "h0/main").data["x"] != c0["x"]
    assert one(ev, "proc_start", "h1/main").t == 2.0


def test_children_signals_and_orphans() -> None:
    world = make_world(f"{M}:parent_main", ["h0"])
    res, ev = simulate(world, [CrashProcess(id="kill-parent", at=7.0, proc="h0/main")])
    codes = one(ev, "codes").data
    assert codes == {"w1": 0, "w2": -15, "w3": -2, "w4": -9, "w5": 5}
    assert one(ev, "graceful").t == pytest.approx(0.5)
    assert of(ev, "child", "h0/w1")[0].data == {"env": {"RANK": "1"}, "args": {"mode": "handler"}}
    # STOP at +0.45 s for 1 s: the tick due at +0.5 runs at the CONT (+1.45), then every 0.1
    w5 = [e.t for e in of(ev, "tick", "h0/w5")]
    start = one(ev, "proc_start", "h0/w5").t
    rel = [round(t - start, 6) for t in w5]
    assert rel[:6] == [0.1, 0.2, 0.3, 0.4, 1.45, 1.55]
    # the parent is killed at 7 s; its child lives on and ends on its own
    assert res.exit_codes["h0/main"] == -9
    assert res.exit_codes["h0/orphan"] == 5
    orphan_exit = one(ev, "proc_exit", "h0/orphan")
    assert orphan_exit.t > 7.0 and res.end_time == orphan_exit.t
    assert set(res.exit_codes) == {"h0/main", "h0/w1", "h0/w2", "h0/w3", "h0/w4", "h0/w5",
                                   "h0/orphan"}


async def stopped_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    p = await rt.start_process("w", f"{M}:child_main", {"mode": "plain"})
    await rt.sleep(1.0)
    p.signal("STOP")
    p.signal("TERM")  # held: a stopped process acts on it when continued
    await rt.sleep(1.0)
    assert p.poll() is None
    p.signal("CONT")
    rt.record("code", code=await p.wait())
    p.signal("KILL")  # after exit: nothing
    return 0


def test_term_to_stopped_process_acts_on_cont() -> None:
    res, ev = simulate(make_world(f"{M}:stopped_main", ["h0"]))
    assert one(ev, "code").data == {"code": -15}
    assert one(ev, "proc_exit", "h0/w").t == pytest.approx(2.0)
    assert res.exit_codes == {"h0/w": -15, "h0/main": 0}


async def shared_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    drawn = rt.shared("tests.drawn", itertools.count)
    await rt.sleep(0.1 * int(rt.host[1:]))
    rt.record("drew", n=next(drawn))
    return 0


def test_a_runs_processes_share_one_object_by_name_and_no_two_runs_share_it() -> None:
    for _ in range(2):
        _, ev = simulate(make_world(f"{M}:shared_main", ["h0", "h1", "h2"]))
        assert [(e.host, e.data["n"]) for e in of(ev, "drew")] == [("h0", 0), ("h1", 1),
                                                                   ("h2", 2)]


def test_bad_entry_exits_1() -> None:
    res, ev = simulate(make_world("tests.sim.no_such_module:main", ["h0"]))
    assert res.exit_codes == {"h0/main": 1}
    assert one(ev, "proc_exit").data["reason"].startswith("ModuleNotFoundError")


async def starting_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    slow = await rt.start_process("w1", f"{M}:child_main", {"mode": "tick"})
    doomed = await rt.start_process("w2", f"{M}:child_main", {"mode": "handler"})
    await rt.sleep(0.5)
    doomed.signal("TERM")  # still starting up: its handler is not installed yet
    rt.record("codes", w1=await slow.wait(), w2=await doomed.wait())
    return 0


def test_a_started_process_runs_its_entry_only_after_its_start_up() -> None:
    world = dataclasses.replace(make_world(f"{M}:starting_main", ["h0"]), process_start=1.3)
    res, ev = simulate(world)
    assert one(ev, "proc_start", "h0/w1").t == pytest.approx(0.0)
    assert one(ev, "child", "h0/w1").t == pytest.approx(1.3)  # the entry runs at +1.3 s
    assert of(ev, "tick", "h0/w1")[0].t == pytest.approx(1.4)
    # TERM during start-up ends the process by the default action; its entry never ran
    assert of(ev, "child", "h0/w2") == [] and of(ev, "graceful", "h0/w2") == []
    assert one(ev, "codes").data == {"w1": 5, "w2": -15}
    assert res.exit_codes["h0/main"] == 0


_json_leaf = (st.none() | st.booleans() | st.integers() | st.text(max_size=3)
              | st.floats(allow_nan=True, allow_infinity=True))
_json_key = st.text(max_size=3) | st.integers(-3, 3) | st.booleans() | st.none()


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_json_key, st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(_json_key, inner, max_size=3), max_leaves=12), max_size=4),
    st.booleans())
def test_a_copied_body_is_exactly_what_json_gives_back(body: dict[Any, Any],
                                                       allow_nan: bool) -> None:
    """Messages and trace fields are copied as JSON would give them back: the fast copy of
    plain bodies and JSON itself agree on every value and type (tuples become lists,
    non-str keys strings, -0.0 stays -0.0), and on what they refuse."""
    from elastic_sim.sim.runtime import _json_copy

    def exact(v: Any) -> Any:  # a comparable form that tells 1 from 1.0 and -0.0 from 0.0
        if isinstance(v, dict):
            return ("d", [(k, exact(x)) for k, x in v.items()])
        if isinstance(v, list):
            return ("l", [exact(x) for x in v])
        return (type(v).__name__, repr(v))

    try:
        want: Any = json.loads(json.dumps(body, allow_nan=allow_nan))
    except ValueError as exc:
        with pytest.raises(type(exc)):
            _json_copy(body, allow_nan)
        return
    got = _json_copy(body, allow_nan)
    assert exact(got) == exact(want)
    if all(type(k) is str for k in body):  # a copy: no list or dict of the body is shared
        assert all(got[k] is not v for k, v in body.items() if isinstance(v, (list, dict)))


def test_a_body_that_contains_itself_is_refused_as_json_refuses_it() -> None:
    from elastic_sim.sim.runtime import _json_copy

    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        _json_copy({"x": loop})
