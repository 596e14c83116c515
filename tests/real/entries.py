"""Small protocol processes that the real-mode tests run (``tests.real.entries:NAME``).

They are written against :mod:`elastic_sim.protocols.api` only, like any protocol, and report what
they observed with ``rt.record`` so the tests can assert on the trace. The set-up they share
with the contract suite's entries is :mod:`tests.contract.entries`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import (
    Cancelled,
    CollectiveError,
    CollectiveFailed,
    OperationTimeout,
    Runtime,
    StoreConnectionError,
    StoreTimeout,
)
from elastic_sim.protocols.broadcast import broadcast_bytes
from elastic_sim.protocols.sync import Event
from tests.contract.entries import done_with_store, join_group, shared_store, store_of_h0

Args = Mapping[str, Any]


async def pingpong(rt: Runtime, args: Args) -> int:
    """h0 pings h1 (which starts late, with a clock ahead) and waits for the pong; h1
    answers, then fails on purpose. h0 also checks tasks, futures and wait_for."""
    if rt.host == "h0":
        rt.send("nowhere/main", {"lost": True})  # no such process: dropped
        await tasks_and_futures(rt)
        await rt.sleep(0.6)  # h1 starts at 0.5
        rt.send("h1/main", {"ping": 1})
        msg = await rt.recv(timeout=10)
        rt.record("got", src=msg.src, body=dict(msg.body))
        try:
            await rt.recv(timeout=0.2)
        except OperationTimeout:
            rt.record("recv_timeout")
        await rt.sleep(float(args.get("linger", 0.0)))
        return 0
    rt.record("clock", now=rt.now())
    msg = await rt.recv(timeout=10)
    rt.send(msg.src, {"pong": msg.body["ping"] + 1})
    await rt.sleep(0.1)
    raise RuntimeError("boom")


async def tasks_and_futures(rt: Runtime) -> None:
    """Cancellation is the contract's Cancelled, and hits only the task cancelled."""
    shared = rt.future()

    async def waiter(tag: str) -> str:
        try:
            return f"{tag}:{await shared}"
        except Cancelled:
            rt.record("cancelled", tag=tag)
            raise

    first, second = rt.spawn(waiter("a"), "a"), rt.spawn(waiter("b"), "b")
    await rt.sleep(0.01)
    first.cancel()
    shared.set_result(42)
    outcome = [await second]
    try:
        await first
    except Cancelled:
        outcome.append("a cancelled")
    try:
        await rt.wait_for(rt.sleep(10), 0.05)
    except OperationTimeout:
        outcome.append("wait_for timed out")

    async def join() -> str:
        return await second

    outcome.append(await rt.wait_for(join(), 1.0))
    rt.record("tasks", outcome=outcome)


async def store_ops(rt: Runtime, args: Args) -> int:
    """h1 exercises the store that h0 hosts; h0 stays up until h1 says it is done."""
    store = await store_of_h0(rt)
    if store is None:
        return 0
    await store.set("k", b"v")
    rt.record("get", value=(await store.get("k")).decode())
    rt.record("add", values=[await store.add("n", 2), await store.add("n", 3)])
    cas = [
        await store.compare_set("c", b"nope", b"x"),  # missing, expected non-empty
        await store.check(["c"]),
        await store.compare_set("c", b"", b"first"),  # missing, expected empty
        await store.compare_set("c", b"first", b"second"),  # matches
        await store.compare_set("c", b"stale", b"third"),  # does not match
    ]
    rt.record("cas", values=[v.decode() if isinstance(v, bytes) else v for v in cas])
    view = store.prefixed("epoch1")
    await view.set("k", b"pv")
    rt.record("prefixed", value=(await store.get("epoch1/k")).decode())
    await store.set("m", b"a")
    rt.record("multi_get", values=[v.decode() for v in await store.multi_get(["m", "epoch1/k"])]
              + [v.decode() for v in await view.multi_get(["k"])])
    rt.record("delete", values=[await store.delete("k"), await store.delete("k")])
    for op in ("get", "wait", "multi_get"):
        t = rt.monotonic()
        try:
            if op == "get":
                await store.get("missing")
            elif op == "multi_get":
                await store.multi_get(["m", "missing"])
            else:
                await store.wait(["missing"], 0.3)
        except StoreTimeout:
            rt.record("store_timeout", op=op, after=rt.monotonic() - t)
    # A call blocked in one task does not hold up the others of the process.
    waiter = rt.spawn(store.wait(["late"], 5.0), "waiter")
    await rt.sleep(0.1)
    await store.set("late", b"1")
    t = rt.monotonic()
    await waiter
    rt.record("wait_released", after=rt.monotonic() - t)
    t = rt.monotonic()
    try:
        await rt.connect_store(f"127.0.0.1:{args['dead_port']}", 0.5)
    except StoreConnectionError:
        rt.record("connect_refused", after=rt.monotonic() - t)
    done_with_store(rt)
    return 0


async def collectives(rt: Runtime, args: Args) -> int:
    """Every host joins one group and runs each collective once."""
    size = int(args["size"])
    _, g = await join_group(rt, size, 10.0)
    rt.record("allreduce", values=await g.allreduce([g.rank + 1.0, 1.0]))
    mine = b"hello" if g.rank == 0 else b"xxxxx"
    rt.record("broadcast", value=bytes(await g.broadcast(mine, root=0)).decode())
    await g.barrier()
    if g.rank == 0:
        await g.send(1, b"p2p")
    elif g.rank == 1:
        rt.record("recv", value=bytes(await g.recv(0, 3)).decode())
    await g.barrier()
    # State broadcasts over send/recv, from a root that is not rank 0; the chain in chunks
    # of 7 bytes (the last one short), each forwarded while the next is received.
    state = bytes(range(200)) if g.rank == 1 else None
    for algorithm in ("tree", "chain"):
        got = await broadcast_bytes(g, state, 1, algorithm, chunk_bytes=7)
        rt.record("state_broadcast", algorithm=algorithm, ok=bytes(got) == bytes(range(200)))
    # A member that aborts leaves the group: its peers fail at once, not at the timeout.
    if g.rank == size - 1:
        g.abort()
        try:
            await g.allreduce([1.0])
        except CollectiveFailed:
            rt.record("aborted_fails_at_once")
        await rt.sleep(2.0)
        return 0
    t = rt.monotonic()
    try:
        await g.allreduce([1.0])
    except CollectiveFailed:
        rt.record("peer_left", after=rt.monotonic() - t)
    if g.rank == 0:
        await rt.sleep(2.5)  # h0 hosts the store: it leaves last
    return 0


async def allreduce_until_error(rt: Runtime, args: Args) -> int:
    """Allreduce in a loop until the group fails; record the error and when."""
    _, g = await join_group(rt, int(args["size"]), float(args["timeout"]))
    ticker = rt.spawn(_tick(rt), "ticker")
    try:
        while True:
            await g.allreduce([1.0])
            await rt.sleep(0.02)
    except CollectiveError as exc:
        rt.record("group_error", error=type(exc).__name__)
        g.abort()  # as protocols do: leave the group, so peers still in it fail too
    if args.get("message_peer"):
        peer = "h1/main" if rt.host == "h0" else "h0/main"
        if rt.host == "h0":
            rt.send(peer, {"while": "frozen"})
        else:
            rt.record("got", body=dict((await rt.recv(timeout=10)).body))
    if args.get("linger"):
        await rt.sleep(float(args["linger"]))  # the store host stays for the others
    ticker.cancel()
    return 0


async def _tick(rt: Runtime) -> None:
    """Record the longest gap between 50 ms ticks (a frozen host shows a long one)."""
    last, longest = rt.monotonic(), 0.0
    while True:
        await rt.sleep(0.05)
        now = rt.monotonic()
        if now - last > longest + 0.5:
            longest = now - last
            rt.record("tick_gap", gap=longest)
        last = now


async def store_until_gone(rt: Runtime, args: Args) -> int:
    """h0 hosts a store and idles; h1 reads it until the server is gone."""
    store = await shared_store(rt, ["h1/main"])
    if rt.host == "h0":
        await rt.sleep(3600)
        return 0
    await store.set("k", b"v")
    while True:
        try:
            await store.get("k")
        except StoreConnectionError:
            rt.record("store_gone")
            break
        await rt.sleep(0.02)
    try:
        await store.set("again", b"1")
    except StoreConnectionError:
        rt.record("store_still_gone")
    return 0


async def parent(rt: Runtime, args: Args) -> int:
    """Start children, signal them, and watch their exit codes."""
    entry = "tests.real.entries:child"
    exit3 = await rt.start_process("c_exit", entry, {"code": 3}, env={"ELASTIC_TEST": "yes"})
    term = await rt.start_process("c_term", entry, {"handle_term": True})
    kill = await rt.start_process("c_kill", entry, {"sleep": 3600})
    await rt.start_process("c_orphan", entry, {"sleep": 3600})
    ready = {(await rt.recv(timeout=60)).src for _ in range(2)}
    rt.record("children_ready", names=sorted(ready))
    kill.signal("STOP")
    kill.signal("CONT")
    term.signal("TERM")
    kill.signal("KILL")
    codes = {p.name: await p.wait() for p in (exit3, term, kill)}
    rt.record("child_codes", codes=codes, poll=kill.poll())
    kill.signal("TERM")  # exited: nothing happens
    return 0


async def child(rt: Runtime, args: Args) -> int:
    """A child: exit with a code, wait for TERM, or sleep."""
    rt.record("child_env", env=dict(rt.info.env), seen=os.environ.get("ELASTIC_TEST", ""))
    if args.get("handle_term"):
        got_term = Event(rt)
        rt.on_signal("TERM", got_term.set)
        rt.send(f"{rt.host}/main", {"ready": True})
        await got_term.wait()
        rt.record("got_term")
        return 7
    if "sleep" in args:
        if rt.name.endswith("c_kill"):
            rt.send(f"{rt.host}/main", {"ready": True})
        await rt.sleep(float(args["sleep"]))
    return int(args.get("code", 0))


async def sleeper(rt: Runtime, args: Args) -> int:
    """Start children that sleep, then sleep (never ends by itself)."""
    for name in args.get("children", []):
        await rt.start_process(name, "tests.real.entries:child", {"sleep": 3600})
    await rt.sleep(3600)
    return 0
