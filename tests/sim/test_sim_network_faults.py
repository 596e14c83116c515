"""Sim network paths and partitions, the fault injector's reports, and scale."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.faults.model import CrashHost, CrashProcess, HangHost, Partition
from elastic_sim.protocols.api import Runtime
from elastic_sim.sim.network import Network
from elastic_sim.world import HostSpec, LinkSpec
from tests.sim.simutil import L, make_world, of, one, simulate, trace_bytes

M = "tests.sim.test_sim_network_faults"
B = 1e9


def net(hosts: list[str], **kw: Any) -> Network:
    return Network(make_world("x:y", hosts, **kw))


def test_star_paths_links_and_group_path() -> None:
    n = net(["h0", "h1", "h2"], links=[LinkSpec("h1", "switch", 0.01, 1e8)])
    assert n.path("h0", "h2") == (2 * L, B)
    assert n.path("h0", "h1") == pytest.approx((L + 0.01, 1e8))
    assert n.path("h1", "h1") == (0.0, B)  # loopback
    assert n.group_path(["h0", "h1", "h2", "h0"]) == pytest.approx((L + 0.01, 1e8))
    assert n.group_path(["h2", "h2"]) == (0.0, B)
    # an extra direct link: not a tree any more, shortest-latency paths through networkx
    m = net(["h0", "h1", "h2"], links=[LinkSpec("h0", "h2", 0.0005, 1e7)])
    assert m.path("h0", "h2") == (0.0005, 1e7)
    assert m.path("h2", "h1") == (2 * L, B)
    assert m.group_path(["h0", "h1", "h2"]) == (2 * L, 1e7)


def test_full_mesh_direct_and_detour() -> None:
    n = net(["h0", "h1", "h2"], topology="full")
    assert n.path("h0", "h1") == (L, B)
    m = net(["h0", "h1", "h2", "h3"], topology="full", links=[LinkSpec("h0", "h1", 0.05, B)])
    assert m.path("h0", "h1") == (2 * L, B)  # around the slow link, through h2 or h3
    assert m.path("h1", "h0") == (2 * L, B)
    assert m.path("h2", "h3") == (L, B)
    assert m.path("h0", "h2") == (L, B)
    k = net(["h0", "h1"], topology="full", links=[LinkSpec("h0", "h1", 0.05, 5.0)])
    assert k.path("h0", "h1") == (0.05, 5.0)  # no other host to go around through


def test_thousands_of_hosts_stay_cheap() -> None:
    hosts = [f"h{i}" for i in range(5000)]
    t0 = time.perf_counter()
    full = net(hosts, topology="full", links=[LinkSpec("h1", "h2", 0.5, B)])
    star = net(hosts)
    assert full.path("h1", "h2") == (2 * L, B)
    assert full.path("h7", "h4999") == (L, B)
    assert star.group_path(hosts) == (2 * L, B)
    assert time.perf_counter() - t0 < 5.0


def test_partition_cuts() -> None:
    n = net(["a", "b", "c", "d"])
    t1 = n.add_cut(Partition(id="p", at=0, duration=1, groups=(("a", "b"), ("c",))))
    assert n.reachable("a", "b") and n.reachable("a", "d") and n.reachable("c", "d")
    assert not n.reachable("a", "c") and not n.reachable("c", "b")
    assert not n.all_reachable(["a", "b", "c"]) and n.all_reachable(["a", "b", "d"])
    t2 = n.add_cut(Partition(id="q", at=0, duration=1, groups=(("a",), ("b",))))
    assert not n.reachable("a", "b")
    n.remove_cut(t1)
    assert n.reachable("a", "c") and not n.reachable("b", "a")
    n.remove_cut(t2)
    assert n.all_reachable(["a", "b", "c", "d"])


# -- faults --------------------------------------------------------------------------------


async def idle_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    await rt.sleep(args.get("life", 10.0))
    if rt.host == "h0":
        for dst in ("h1/main", "h2/main", "nobody/main"):
            rt.send(dst, {"x": 1})
    else:
        try:
            msg = await rt.recv(timeout=1.0)
            rt.record("got", src=msg.src)
        except Exception:
            rt.record("nothing")
    return 0


def test_fault_reports_and_trace() -> None:
    hosts = [HostSpec("h0"), HostSpec("h1"), HostSpec("h2"), HostSpec("late", start_at=5.0)]
    faults = [
        CrashHost(id="c1", at=1.0, host="h1"),
        CrashHost(id="c1-again", at=2.0, host="h1"),
        CrashProcess(id="cp", at=3.0, proc="h1/main"),
        CrashHost(id="late", at=4.0, host="late"),
        HangHost(id="hang", at=4.0, duration=1.0, host="h2"),
        CrashHost(id="nope", at=4.5, host="h9"),
        Partition(id="cut", at=6.0, duration=1.0, groups=(("h0",), ("h2",))),
        CrashHost(id="after", at=50.0, host="h0"),
    ]
    res, ev = simulate(make_world(f"{M}:idle_main", hosts), faults)
    rep = {r.id: r for r in res.faults}
    assert [r.id for r in res.faults] == [f.id for f in faults]
    assert rep["c1"].fired and rep["c1"].at == 1.0
    assert not rep["c1-again"].fired and rep["c1-again"].reason == "host h1 already down"
    assert not rep["cp"].fired and "h1" in rep["cp"].reason
    assert rep["late"].fired and "late/main" not in res.exit_codes  # it never starts
    assert rep["hang"].fired and rep["cut"].fired
    assert not rep["nope"].fired and "unknown host" in rep["nope"].reason
    assert not rep["after"].fired and "after the run ended" in rep["after"].reason
    fault_ev = [(e.t, e.host, e.data["id"], e.data["phase"]) for e in of(ev, "fault")]
    assert fault_ev == [
        (1.0, "h1", "c1", "start"),
        (2.0, "h1", "c1-again", "skipped"),
        (3.0, "h1", "cp", "skipped"),
        (4.0, "late", "late", "start"),
        (4.0, "h2", "hang", "start"),
        (4.5, "h9", "nope", "skipped"),
        (5.0, "h2", "hang", "heal"),
        (6.0, "*", "cut", "start"),
        (7.0, "*", "cut", "heal"),
    ]
    assert {e.proc for e in of(ev, "fault")} == {"fault-injector"}
    assert of(ev, "fault")[7].data["target"] == [["h0"], ["h2"]]
    # at 10 s h0 sends to h1 (dead), h2 and nobody: only h2 gets it
    assert [e.proc for e in of(ev, "got")] == ["h2/main"]
    assert res.exit_codes == {"h0/main": 0, "h1/main": -9, "h2/main": 0}


def test_partition_drops_messages_at_send_time() -> None:
    cut = Partition(id="cut", at=9.0, duration=3.0, groups=(("h0",), ("h2",)))
    _res, ev = simulate(make_world(f"{M}:idle_main", ["h0", "h1", "h2"]), [cut])
    assert [e.proc for e in of(ev, "got")] == ["h1/main"]
    assert [e.proc for e in of(ev, "nothing")] == ["h2/main"]


# -- scale ---------------------------------------------------------------------------------


async def rdzv_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    n = args["n"]
    rank = int(rt.host[1:])
    if rank == 0:
        await rt.host_store(0)
    else:
        await rt.sleep(0.01)
    store = await rt.connect_store("h0:29500", timeout=10)
    await store.add("joined", 1)
    if await store.add("arrived", 1) == n:
        await store.set("go", b"1")
    await store.get("go")
    g = await rt.new_group(store, "big", rank, n, 60.0)
    out = await g.allreduce([1.0])
    if rank == 0:
        rt.record("sum", value=out[0])
        for i in range(1, n):
            rt.send(f"h{i}/main", {"bye": i})
    else:
        await rt.recv(timeout=10)
    return 0


def test_thousand_host_rendezvous_is_fast_and_deterministic() -> None:
    n = 1000
    world = make_world(f"{M}:rdzv_main", [f"h{i}" for i in range(n)], {"n": n}, latency=5e-5)
    t0 = time.perf_counter()
    res, ev = simulate(world, seed=3)
    wall = time.perf_counter() - t0
    assert one(ev, "sum").data == {"value": float(n)}
    assert len(res.exit_codes) == n and set(res.exit_codes.values()) == {0}
    assert wall < 10.0, wall
    _, ev2 = simulate(world, seed=3)
    assert trace_bytes(ev) == trace_bytes(ev2)
