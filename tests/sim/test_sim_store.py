"""The sim store: c10d TCPStore semantics, costs, a dead server, a frozen server, a powered-off
server, a cut."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.faults.model import CrashHost, HangHost, Partition, PowerOff
from elastic_sim.protocols.api import Runtime, Store, StoreError
from elastic_sim.sim.store import RETRANSMISSION_TIMEOUT
from tests.sim.simutil import L, make_world, of, one, simulate

M = "tests.sim.test_sim_store"
S = 50e-6  # server service time
RTT = 4 * L  # client -> switch -> server and back


async def _client(rt: Runtime, args: Mapping[str, Any]) -> Store:
    await rt.sleep(0.001)
    return await rt.connect_store("h0:29500", timeout=args.get("timeout", 5.0))


async def _op(rt: Runtime, tag: str, aw: Any) -> Any:
    t0 = rt.monotonic()
    try:
        out = await aw
    except StoreError as exc:
        rt.record(tag, error=type(exc).__name__, start=t0)
        return None
    rt.record(tag, value=out.decode() if isinstance(out, bytes) else out, start=t0)
    return out


async def server_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    addr = await rt.host_store(0)
    rt.record("hosted", addr=addr)
    await rt.sleep(args.get("server_life", 20.0))
    return 0


async def blocking_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    store = await _client(rt, {"timeout": 1.0})
    if rt.host == "h1":
        await _op(rt, "get_k", store.get("k"))
        await _op(rt, "get_missing", store.get("missing"))
        await _op(rt, "wait_override", store.wait(["missing"], timeout=0.25))
    else:
        await rt.sleep(0.5)
        await _op(rt, "set_k", store.set("k", b"v"))
    return 0


async def semantics_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    s = await _client(rt, args)
    await _op(rt, "cas_missing_empty", s.compare_set("a", b"", b"x"))
    await _op(rt, "get_a", s.get("a"))
    await _op(rt, "cas_missing_nonempty", s.compare_set("b", b"y", b"z"))
    await _op(rt, "check_b", s.check(["b"]))
    await _op(rt, "cas_match", s.compare_set("a", b"x", b"w"))
    await _op(rt, "cas_mismatch", s.compare_set("a", b"nope", b"q"))
    await _op(rt, "add_5", s.add("n", 5))
    await _op(rt, "add_-2", s.add("n", -2))
    await _op(rt, "get_n", s.get("n"))
    await _op(rt, "add_text", s.add("a", 1))
    p = s.prefixed("run1")
    await _op(rt, "prefixed_set", p.set("k", b"pv"))
    await _op(rt, "prefixed_get_raw", s.get("run1/k"))
    await _op(rt, "delete_n", s.delete("n"))
    await _op(rt, "delete_n_again", s.delete("n"))
    await _op(rt, "check_ab", s.check(["a", "run1/k"]))
    return 0


async def crash_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    s = await _client(rt, {"timeout": 100.0})
    await _op(rt, "get_pending", s.get("never"))
    await _op(rt, "set_after", s.set("x", b"1"))
    try:
        await rt.connect_store("h0:29500", timeout=0.5)
    except StoreError as exc:
        rt.record("reconnect", error=type(exc).__name__)
    return 0


async def frozen_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    s = await _client(rt, {"timeout": 0.5})
    if rt.host == "h1":
        await rt.sleep(2.0 - rt.monotonic())
        await _op(rt, "set_frozen", s.set("k", b"v"))
        await _op(rt, "add_frozen", s.add("n", 1))
    else:
        await rt.sleep(1.5 - rt.monotonic())
        await _op(rt, "get_frozen", s.get("missing"))
    return 0


async def silent_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, {"server_life": 10_000.0})
    s = await _client(rt, {"timeout": 60.0})
    if rt.host == "h1":
        await _op(rt, "get_parked", s.get("never"))  # at the server when it goes off
    else:
        await rt.sleep(2.0 - rt.monotonic())
        await _op(rt, "cas_off", s.compare_set("k", b"", b"v"))
        await _op(rt, "get_off", s.get("k"))
    return 0


async def cut_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    s = await _client(rt, {"timeout": 10.0})
    await rt.sleep(1.0 - rt.monotonic())
    await _op(rt, "set_cut", s.set("k", b"v"))
    return 0


async def late_server_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        await rt.sleep(1.0)
        return await server_main(rt, args)
    try:
        s = await rt.connect_store("h0:29500", timeout=args["timeout"])
    except StoreError as exc:
        rt.record("connect", error=type(exc).__name__)
        return 1
    rt.record("connect", ok=True)
    await s.set("x", b"1")
    return 0


# -- tests ---------------------------------------------------------------------------------


def test_get_blocks_until_set_and_times_out() -> None:
    res, ev = simulate(make_world(f"{M}:blocking_main", ["h0", "h1", "h2"]))
    assert one(ev, "hosted").data == {"addr": "h0:29500"}
    set_k = one(ev, "set_k")
    get_k = one(ev, "get_k")
    assert get_k.data["value"] == "v"
    # the set reaches the server at +2L; the parked get is answered after the set's reply
    assert get_k.t == pytest.approx(set_k.data["start"] + 2 * L + 2 * S + 2 * L, abs=1e-9)
    assert set_k.t == pytest.approx(set_k.data["start"] + RTT + S, abs=1e-9)
    miss = one(ev, "get_missing")
    assert miss.data["error"] == "StoreTimeout"
    assert miss.t == pytest.approx(get_k.t + 1.0, abs=1e-9)  # the client timeout
    wait = one(ev, "wait_override")
    assert wait.data["error"] == "StoreTimeout" and wait.t == pytest.approx(miss.t + 0.25)
    assert res.exit_codes["h1/main"] == 0


def test_compare_set_add_delete_semantics_and_cost() -> None:
    _res, ev = simulate(make_world(f"{M}:semantics_main", ["h0", "h1"]))
    got = {e.kind: e.data.get("value", e.data.get("error")) for e in ev if "start" in e.data}
    assert got == {
        "cas_missing_empty": "x",
        "get_a": "x",
        "cas_missing_nonempty": "y",
        "check_b": False,
        "cas_match": "w",
        "cas_mismatch": "w",
        "add_5": 5,
        "add_-2": 3,
        "get_n": "3",
        "add_text": "StoreError",
        "prefixed_set": None,
        "prefixed_get_raw": "pv",
        "delete_n": True,
        "delete_n_again": False,
        "check_ab": True,
    }
    first = one(ev, "cas_missing_empty")
    assert first.t - first.data["start"] == pytest.approx(RTT + S, abs=1e-9)


def test_dead_server_fails_at_once_and_never_reconnects() -> None:
    world = make_world(f"{M}:crash_main", ["h0", "h1"])
    res, ev = simulate(world, [CrashHost(id="c", at=1.0, host="h0")])
    pend = one(ev, "get_pending")
    assert pend.data["error"] == "StoreConnectionError" and pend.t == 1.0
    after = one(ev, "set_after")
    assert after.data["error"] == "StoreConnectionError" and after.t == 1.0
    assert one(ev, "reconnect").data == {"error": "StoreConnectionError"}
    assert res.exit_codes["h0/main"] == -9


def test_frozen_server_holds_requests_until_resume() -> None:
    world = make_world(f"{M}:frozen_main", ["h0", "h1", "h2"])
    _res, ev = simulate(world, [HangHost(id="hang", at=1.0, duration=3.0, host="h0")])
    get = one(ev, "get_frozen")  # sent at 1.5 with a 0.5 s timeout: deadline 2.0
    assert get.data["error"] == "StoreTimeout"
    assert get.t == pytest.approx(4.0 + S + 2 * L, abs=1e-9)  # reported when the server answers
    s = one(ev, "set_frozen")  # sent at 2.0: no timeout, served on resume, after the get
    assert s.data["value"] is None
    assert s.t == pytest.approx(4.0 + 2 * S + 2 * L, abs=1e-9)
    a = one(ev, "add_frozen")
    assert a.data["value"] == 1 and a.t == pytest.approx(s.t + RTT + S, abs=1e-9)


def test_calls_to_a_powered_off_server_end_on_the_clients_own_timeouts() -> None:
    """No FIN or RST leaves a powered-off host: a call with a deadline raises StoreTimeout
    at it (the client's timeout), one without fails once the client's kernel stops
    retransmitting it, and that connection's later calls at once, where calls to a merely
    frozen server wait for it."""
    world = make_world(f"{M}:silent_main", ["h0", "h1", "h2"], time_limit=2000.0)
    res, ev = simulate(world, [PowerOff(id="off", at=1.0, host="h0")])
    parked = one(ev, "get_parked")
    assert parked.data["error"] == "StoreTimeout"
    assert parked.t == pytest.approx(parked.data["start"] + 60.0, abs=1e-9)
    cas = one(ev, "cas_off")
    assert cas.data["error"] == "StoreConnectionError"
    assert cas.t == pytest.approx(cas.data["start"] + RETRANSMISSION_TIMEOUT, abs=1e-9)
    get = one(ev, "get_off")  # the kernel dropped that connection: it fails at once
    assert get.data["error"] == "StoreConnectionError" and get.t == cas.t
    assert res.exit_codes["h0/main"] == -9


def test_partitioned_client_is_held_until_heal() -> None:
    world = make_world(f"{M}:cut_main", ["h0", "h1", "h2"])
    cut = Partition(id="p", at=0.5, duration=2.0, groups=(("h0",), ("h1",)))
    _res, ev = simulate(world, [cut])
    held = one(ev, "set_cut", "h1/main")
    free = one(ev, "set_cut", "h2/main")  # h2 is in no group: it still reaches the server
    assert free.t == pytest.approx(1.0 + RTT + S, abs=1e-9)
    assert held.t == pytest.approx(2.5 + S + 2 * L, abs=1e-9)
    assert [e.data["phase"] for e in of(ev, "fault")] == ["start", "heal"]


def test_connect_retries_until_server_or_timeout() -> None:
    _ok, ev = simulate(make_world(f"{M}:late_server_main", ["h0", "h1"], {"timeout": 5.0}))
    c = one(ev, "connect")
    assert c.data == {"ok": True} and 1.0 < c.t < 2.5
    bad, ev2 = simulate(make_world(f"{M}:late_server_main", ["h0", "h1"], {"timeout": 0.5}))
    c2 = one(ev2, "connect")
    assert c2.data == {"error": "StoreConnectionError"} and c2.t == pytest.approx(0.5)
    assert bad.exit_codes["h1/main"] == 1


async def forget_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    import sys

    if rt.host == "h0":
        return await server_main(rt, args)
    s = await _client(rt, {"timeout": 60.0})
    read = ("r" * 1000).encode()  # the value a get answers with
    only_set = ("s" * 1000).encode()  # a value that was only ever set
    for value in (read, only_set):
        await s.set("k", value)
        if value is read:
            got = await s.get("k")
            assert got is read  # the simulator hands the stored object itself
            del got
        await s.set("k", b"next")
    del value
    rt.record("refs", read=sys.getrefcount(read), only_set=sys.getrefcount(only_set))
    return 0


def test_an_answered_request_is_forgotten_before_its_deadline() -> None:
    """The deadline of a get (60 s here) must not keep the answered request, and with it
    the value it returned, alive: at 10,000 rendezvous agents that retained every state
    served in the last minute (gigabytes)."""
    _, events = simulate(make_world(f"{M}:forget_main"))
    refs = one(events, "refs")
    assert refs.t < 1.0
    assert refs.get("read") == refs.get("only_set")


async def multi_get_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    if rt.host == "h0":
        return await server_main(rt, args)
    store = await _client(rt, {"timeout": 1.0})
    if rt.host == "h1":
        p = store.prefixed("run")
        t0 = rt.monotonic()
        got = await p.multi_get(["a", "b", "c"])
        rt.record("multi_get", values=[v.decode() for v in got], start=t0)
        await _op(rt, "multi_get_missing", store.multi_get(["run/a", "missing"]))
    else:
        for key in ("run/a", "run/c"):
            await store.set(key, key.encode())
        await rt.sleep(0.5)
        await _op(rt, "set_b", store.set("run/b", b"run/b"))
    return 0


def test_multi_get_is_one_request_that_waits_for_every_key() -> None:
    _res, ev = simulate(make_world(f"{M}:multi_get_main", ["h0", "h1", "h2"]))
    got = one(ev, "multi_get")
    assert got.data["values"] == ["run/a", "run/b", "run/c"]  # in the order asked
    set_b = one(ev, "set_b")
    # parked on the last missing key; answered like one get once that key is written
    assert got.t == pytest.approx(set_b.data["start"] + 2 * L + 2 * S + 2 * L, abs=1e-9)
    miss = one(ev, "multi_get_missing")
    assert miss.data["error"] == "StoreTimeout"
    assert miss.t == pytest.approx(got.t + 1.0, abs=1e-9)
