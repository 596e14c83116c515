"""Sim process groups: matching, cost, results, death, hangs, partitions, determinism."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.faults.model import CrashHost, HangHost, Partition
from elastic_sim.protocols.api import CollectiveError, Runtime
from elastic_sim.world import CollectiveModel
from tests.sim.simutil import L, h0_store, make_world, of, one, simulate, trace_bytes

M = "tests.sim.test_sim_collectives"
HOSTS = ["h0", "h1", "h2", "h3"]
ALPHA = CollectiveModel().alpha
BW = 1e9
FAST = CollectiveModel(detect_slow_prob=0.0)


async def coll_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Rank = host index; rank 0 hosts the store. Runs ``steps`` allreduces, each after a
    per-host delay; ``retry``: after a failure, try once more."""
    rank = int(rt.host[1:])
    size = args["size"]
    store = await h0_store(rt)
    try:
        g = await rt.new_group(store, args.get("group", "g0"), rank, size, args["timeout"])
    except CollectiveError as exc:
        rt.record("join_err", error=type(exc).__name__)
        return 2
    for step in range(args.get("steps", 1)):
        delay = args.get("delay", {}).get(rt.host, 0.0)
        if delay:
            await rt.sleep(delay)
        try:
            out = await g.allreduce([float(rank + 1)] * args.get("n", 1))
        except CollectiveError as exc:
            rt.record("err", step=step, error=type(exc).__name__)
            if args.get("retry"):
                try:
                    await g.allreduce([1.0])
                except CollectiveError as exc2:
                    rt.record("retry_err", error=type(exc2).__name__)
            return 3
        rt.record("ar", step=step, out=out[0])
    if args.get("bcast"):
        data = await g.broadcast(b"root-data!" if rank == 1 else b"0123456789", root=1)
        rt.record("bcast", data=data.decode())
        await g.barrier()
        if rank in (0, 1):
            if rank == 0:
                await g.send(1, b"hello")
            else:
                rt.record("p2p", data=(await g.recv(0, 5)).decode())
    await rt.sleep(args.get("linger", 0.0))
    return 0


async def part_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rank = int(rt.host[1:])
    store = await h0_store(rt)
    g = await rt.new_group(store, "g0", rank, 4, 1.0)
    await rt.sleep(1.0 - rt.monotonic())
    if rank == 0:
        rt.send("h2/main", {"during": 1})
    try:
        await g.allreduce([1.0])
    except CollectiveError as exc:
        rt.record("err", error=type(exc).__name__)
    await rt.sleep(4.0 - rt.monotonic())  # the cut healed at 2.5
    if rank == 0:
        rt.send("h2/main", {"after": 1})
    g1 = await rt.new_group(store, "g1", rank, 4, 1.0)
    out = await g1.allreduce([1.0])
    rt.record("ar", out=out[0])
    if rank == 2:
        while True:
            try:
                msg = await rt.recv(timeout=1.0)
            except Exception:
                break
            rt.record("msg", body=dict(msg.body))
    return 0


def ring_cost(w: int, n: int, lat: float, bw: float = BW) -> float:
    return 2 * (w - 1) * (ALPHA + lat) + 2 * (w - 1) / w * n / bw


def barrier_cost(w: int, lat: float) -> float:
    return 2 * math.ceil(math.log2(w)) * (ALPHA + lat)


def test_collective_completes_when_all_entered_with_cost() -> None:
    args = {"size": 4, "timeout": 10.0, "n": 1000, "delay": {"h3": 1.0}, "bcast": True}
    res, ev = simulate(make_world(f"{M}:coll_main", HOSTS, args))
    assert res.exit_codes == {f"h{i}/main": 0 for i in range(4)}
    ready = of(ev, "group_ready")
    inits = of(ev, "group_init")
    assert {e.t for e in ready} == {max(e.t for e in inits) + barrier_cost(4, 2 * L)}
    enters = [e for e in of(ev, "coll_enter") if e.data["op"] == "allreduce"]
    assert {e.data["nbytes"] for e in enters} == {8000}
    last = max(e.t for e in enters)
    assert last == next(e for e in enters if e.proc == "h3/main").t
    done = [e for e in of(ev, "coll_done") if e.data["op"] == "allreduce"]
    assert len(done) == 4
    expect = last + ring_cost(4, 8000, 2 * L)
    assert all(e.t == pytest.approx(expect, abs=1e-12) for e in done)
    assert all(e.t >= 1.0 for e in done)  # nobody finished before h3 entered
    assert {e.data["out"] for e in of(ev, "ar")} == {10.0}
    assert {e.data["data"] for e in of(ev, "bcast")} == {"root-data!"}
    bdone = [e.t for e in of(ev, "coll_done") if e.data["op"] == "broadcast"]
    assert bdone == [pytest.approx(expect + 3 * (ALPHA + 2 * L + 10 / BW))] * 4
    assert one(ev, "p2p").data == {"data": "hello"}


def test_member_crash_survivors_fail_at_different_times() -> None:
    args = {"size": 4, "timeout": 30.0, "delay": {"h3": 5.0}, "retry": True}
    world = make_world(f"{M}:coll_main", HOSTS, args, collectives=FAST)
    res, ev = simulate(world, [CrashHost(id="c3", at=1.0, host="h3")])
    fails = [e for e in of(ev, "coll_fail") if e.data["seq"] == 0]
    assert len(fails) == 3 and {e.data["error"] for e in fails} == {"CollectiveFailed"}
    times = [e.t for e in fails]
    assert len(set(times)) == 3
    assert all(1.0 <= t <= 1.0 + FAST.detect_fast_max for t in times)
    # a later collective on the broken group fails too, at once (already detected)
    retries = of(ev, "retry_err")
    assert [e.data["error"] for e in retries] == ["CollectiveFailed"] * 3
    assert [e.t for e in retries] == [e.t for e in of(ev, "err")]
    assert res.exit_codes["h3/main"] == -9 and res.exit_codes["h0/main"] == 3


def test_slow_detection_waits_for_the_timeout() -> None:
    args = {"size": 3, "timeout": 4.0, "delay": {"h2": 5.0}}
    world = make_world(f"{M}:coll_main", HOSTS[:3], args,
                      collectives=CollectiveModel(detect_slow_prob=1.0))
    _res, ev = simulate(world, [CrashHost(id="c2", at=1.0, host="h2")])
    enters = {e.proc: e.t for e in of(ev, "coll_enter")}
    fails = of(ev, "coll_fail")
    assert {e.data["error"] for e in fails} == {"CollectiveTimeout"}
    assert all(e.t == pytest.approx(enters[e.proc] + 4.0) for e in fails)


def test_hang_times_out_and_healed_hang_completes() -> None:
    args = {"size": 4, "timeout": 2.0}
    world = make_world(f"{M}:coll_main", HOSTS, {**args, "delay": {"h3": 1.0}})
    res, ev = simulate(world, [HangHost(id="h", at=0.5, duration=100.0, host="h3")])
    fails = of(ev, "coll_fail")
    enters = {e.proc: e.t for e in of(ev, "coll_enter")}
    assert sorted(e.proc for e in fails) == ["h0/main", "h1/main", "h2/main"]
    assert all(e.data["error"] == "CollectiveTimeout" for e in fails)
    assert all(e.t == pytest.approx(enters[e.proc] + 2.0) for e in fails)
    assert res.hung and res.exit_codes == {"h0/main": 3, "h1/main": 3, "h2/main": 3}
    # h3 entered before its hang; the others enter at ~1.0; the hang heals at 2.0 < timeout
    delays = {h: 1.0 for h in HOSTS[:3]}
    world2 = make_world(f"{M}:coll_main", HOSTS, {**args, "timeout": 5.0, "delay": delays})
    _res2, ev2 = simulate(world2, [HangHost(id="h", at=0.5, duration=1.5, host="h3")])
    done = of(ev2, "coll_done")
    assert len(done) == 4 and of(ev2, "coll_fail") == []
    assert {round(e.t, 12) for e in done} == {round(2.0 + ring_cost(4, 8, 2 * L), 12)}


def test_partition_loses_messages_and_times_out_then_heals() -> None:
    world = make_world(f"{M}:part_main", HOSTS)
    cut = Partition(id="p", at=0.5, duration=2.0, groups=(("h0", "h1"), ("h2", "h3")))
    res, ev = simulate(world, [cut])
    errs = of(ev, "err")
    assert len(errs) == 4 and {e.data["error"] for e in errs} == {"CollectiveTimeout"}
    assert all(e.t == pytest.approx(2.0, abs=1e-3) for e in errs)
    assert {e.data["out"] for e in of(ev, "ar")} == {4.0}
    assert [e.data["body"] for e in of(ev, "msg")] == [{"after": 1}]  # the first was lost
    assert res.exit_codes == {f"h{i}/main": 0 for i in range(4)}


def test_group_join_timeout_and_dead_store() -> None:
    args = {"size": 5, "timeout": 2.0}
    _res, ev = simulate(make_world(f"{M}:coll_main", HOSTS, args))
    joins = {e.proc: (e.t, e.data["error"]) for e in of(ev, "join_err")}
    t0 = one(ev, "group_init", "h0/main").t + 2.0
    assert joins["h0/main"] == (t0, "CollectiveTimeout")
    # h0 hosted the store and exits: the others' rendezvous fails at once
    assert [joins[f"h{i}/main"] for i in (1, 2, 3)] == [(t0, "CollectiveFailed")] * 3
    # the store host crashes while the others wait for a 4th member that never comes
    _res2, ev2 = simulate(make_world(f"{M}:coll_main", HOSTS[:3], {"size": 4, "timeout": 5.0}),
                         [CrashHost(id="c0", at=1.0, host="h0")])
    errs = of(ev2, "join_err")
    assert sorted(e.proc for e in errs) == ["h1/main", "h2/main"]
    assert {e.data["error"] for e in errs} == {"CollectiveFailed"}
    assert all(e.t == 1.0 for e in errs)


def run_bytes(seed: int) -> tuple[bytes, list[float]]:
    args = {"size": 4, "timeout": 30.0, "delay": {"h3": 5.0}}
    world = make_world(f"{M}:coll_main", HOSTS, args, collectives=FAST)
    _, ev = simulate(world, [CrashHost(id="c3", at=1.0, host="h3")], seed=seed)
    return trace_bytes(ev), [e.t for e in of(ev, "coll_fail") if e.data["seq"] == 0]


def test_same_seed_same_bytes_other_seed_other_trace() -> None:
    a, ta = run_bytes(7)
    b, _ = run_bytes(7)
    c, tc = run_bytes(8)
    assert a == b
    assert a != c and ta != tc


async def abort_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rank = int(rt.host[1:])
    store = await h0_store(rt)
    g = await rt.new_group(store, "g0", rank, 3, 10.0)
    try:
        if rank == 0:
            await g.recv(1, 4)
        elif rank == 2:
            await g.allreduce([1.0])
        else:
            pending = rt.spawn(g.allreduce([2.0]))
            await rt.sleep(1.0)
            g.abort()
            try:
                await pending
            except CollectiveError as exc:
                rt.record("own_pending", error=type(exc).__name__)
            await g.barrier()
    except CollectiveError as exc:
        rt.record("err", error=type(exc).__name__)
    return 0


async def mismatch_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rank = int(rt.host[1:])
    store = await h0_store(rt)
    g = await rt.new_group(store, "g0", rank, 3, 2.0)
    try:
        await g.broadcast(b"x" * (rank + 1), root=0)
    except CollectiveError as exc:
        rt.record("err", error=type(exc).__name__)
    return 0


def test_abort_fails_own_calls_at_once_and_peers_after_detection() -> None:
    world = make_world(f"{M}:abort_main", HOSTS[:3], collectives=FAST)
    res, ev = simulate(world)
    own = one(ev, "own_pending", "h1/main")
    aborted_at = one(ev, "group_ready", "h1/main").t + 1.0
    assert own.data == {"error": "CollectiveFailed"} and own.t == pytest.approx(aborted_at)
    e1 = one(ev, "err", "h1/main")  # a later call after abort: at once
    assert e1.data == {"error": "CollectiveFailed"} and e1.t == own.t
    e0 = one(ev, "err", "h0/main")  # p2p recv from the aborted rank
    e2 = one(ev, "err", "h2/main")  # allreduce with the aborted rank
    assert e0.data == e2.data == {"error": "CollectiveFailed"}
    for e in (e0, e2):
        assert own.t <= e.t <= own.t + FAST.detect_fast_max
    assert e0.t != e2.t
    assert res.exit_codes == {"h0/main": 0, "h1/main": 0, "h2/main": 0}


def test_mismatched_broadcast_times_out() -> None:
    _, ev = simulate(make_world(f"{M}:mismatch_main", HOSTS[:3]))
    enters = {e.proc: e.t for e in of(ev, "coll_enter")}
    errs = of(ev, "err")
    assert len(errs) == 3 and {e.data["error"] for e in errs} == {"CollectiveTimeout"}
    assert all(e.t == pytest.approx(enters[e.proc] + 2.0) for e in errs)


SCRIPT = """
import hashlib, sys
sys.path.insert(0, {root!r})
from tests.sim.test_sim_collectives import run_bytes
print(hashlib.sha256(run_bytes(11)[0]).hexdigest())
"""


def test_trace_is_identical_across_interpreters() -> None:
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    digests = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT.format(root=root)],
            env=env, capture_output=True, text=True, check=True, cwd=root,
        )
        digests.add(out.stdout.strip())
    import hashlib

    assert digests == {hashlib.sha256(run_bytes(11)[0]).hexdigest()}
