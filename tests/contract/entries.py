"""Protocol processes for the contract suite (``tests.contract.entries:NAME``): each one
exercises one part of :mod:`elastic_sim.protocols.api` and records what it observed, in a form that
does not depend on the runtime (no timings beyond coarse bounds). The set-up they share
(:func:`shared_store`, :func:`store_of_h0`, :func:`join_group`) is the one every test entry
uses, the real runtime's own (:mod:`tests.real.entries`) included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import (
    Cancelled,
    CollectiveError,
    OperationTimeout,
    Runtime,
    Store,
    StoreTimeout,
    TracedGroup,
)

Args = Mapping[str, Any]


async def shared_store(rt: Runtime, peers: list[str], timeout: float = 5.0) -> Store:
    """h0 hosts a store and tells ``peers`` where; everyone returns a client of it."""
    if rt.host == "h0":
        addr = await rt.host_store(0)
        rt.record("store_addr", addr=addr)
        for peer in peers:
            rt.send(peer, {"store": addr})
    else:
        addr = str((await rt.recv(timeout=30)).body["store"])
    return await rt.connect_store(addr, timeout)


async def store_of_h0(rt: Runtime) -> Store | None:
    """h0 hosts a store and serves it until h1 says it is done (:func:`done_with_store`):
    None; h1 gets a client of it whose calls time out after 0.5 s."""
    if rt.host == "h0":
        await shared_store(rt, ["h1/main"])
        await rt.recv(timeout=30)
        return None
    return await shared_store(rt, [], timeout=0.5)


def done_with_store(rt: Runtime) -> None:
    """Tell h0 that its store may go (:func:`store_of_h0`)."""
    rt.send("h0/main", {"done": True})


async def join_group(rt: Runtime, size: int, timeout: float) -> tuple[Store, TracedGroup]:
    """Hosts h0..h<size-1> join group ``g0`` (rank: the host's number) through h0's store."""
    rank = int(rt.host[1:])
    store = await shared_store(rt, [f"h{r}/main" for r in range(1, size)])
    group = await rt.new_group(store.prefixed("epoch0"), "g0", rank, size, timeout)
    return store, group


async def returns(rt: Runtime, args: Args) -> Any:
    """Return ``args["value"]``, raise (``"raise"``), or ``SystemExit(args["code"])``."""
    await rt.sleep(0.01)
    if args.get("raise"):
        raise RuntimeError("on purpose")
    if "exit" in args:
        raise SystemExit(args["exit"])
    return args.get("value")


async def store_semantics(rt: Runtime, args: Args) -> int:
    """h1 uses the store h0 hosts: values, counters, compare-and-set, delete, timeouts."""
    store = await store_of_h0(rt)
    if store is None:
        return 0
    obs: list[Any] = []
    await store.set("k", b"v")
    obs += [(await store.get("k")).decode(), await store.add("n", 2), await store.add("n", -5)]
    obs += [(await store.compare_set("c", b"", b"a")).decode(),
            (await store.compare_set("c", b"zz", b"b")).decode(),
            (await store.compare_set("c", b"a", b"b")).decode()]
    obs += [await store.check(["k", "c"]), await store.check(["k", "nope"]),
            await store.delete("k"), await store.delete("k")]
    for op in ("get", "wait"):
        t = rt.monotonic()
        try:
            await (store.get("missing") if op == "get" else store.wait(["missing"], 0.3))
            obs.append(f"{op}: no timeout")
        except StoreTimeout:
            obs.append(f"{op}: StoreTimeout after >= 0.3 s: {rt.monotonic() - t >= 0.29}")
    rt.record("obs", values=obs)
    done_with_store(rt)
    return 0


async def mailbox(rt: Runtime, args: Args) -> int:
    """h0 sends three messages to h1, which reads them in order, then times out."""
    if rt.host == "h0":
        for i in range(3):
            rt.send("h1/main", {"i": i})
        await rt.sleep(0.5)
        return 0
    got = [dict((await rt.recv(timeout=10)).body) for _ in range(3)]
    try:
        await rt.recv(timeout=0.2)
        timeout = "no timeout"
    except OperationTimeout:
        timeout = "OperationTimeout"
    rt.record("obs", values=[got, timeout])
    return 0


async def cancellation(rt: Runtime, args: Args) -> int:
    """A cancelled task gets Cancelled where it waits, runs its cleanup, and whoever awaits
    it gets Cancelled too; an ``except Exception`` does not swallow it."""
    obs: list[Any] = []

    async def sleeper() -> str:
        try:
            try:
                await rt.sleep(10)
            except Exception:  # must not catch Cancelled
                obs.append("swallowed")
            return "finished"
        finally:
            obs.append("cleanup")

    task = rt.spawn(sleeper(), "sleeper")
    await rt.sleep(0.1)
    task.cancel()
    try:
        obs.append(await task)
    except Cancelled:
        obs.append("awaiting it raised Cancelled")
    obs.append(task.done())
    rt.record("obs", values=obs)
    return 0


async def collective_errors(rt: Runtime, args: Args) -> int:
    """Two hosts allreduce once; then h1 ``args["then"]``: "exit" (h0's next collective
    fails) or "hang" (it times out: h1 sleeps past the group timeout)."""
    _, g = await join_group(rt, 2, float(args["timeout"]))
    await g.allreduce([1.0])
    if rt.host == "h1":
        if args["then"] == "hang":
            await rt.sleep(float(args["timeout"]) * 3)
        return 0
    try:
        await g.allreduce([1.0])
        rt.record("obs", values=["no error"])
    except CollectiveError as exc:
        rt.record("obs", values=[type(exc).__name__])
    if args["then"] == "hang":
        await rt.sleep(float(args["timeout"]) * 2)  # the store host outlives h1
    return 0


async def daemon(rt: Runtime, args: Args) -> int:
    """h1 stands for a daemon outside the job (:meth:`Runtime.detach`) and never ends on
    its own; it starts a child that works 1 s (the job's). h0 ends at once."""
    if rt.host == "h0":
        await rt.sleep(0.2)
        return 0
    rt.detach()
    await rt.start_process("c", "tests.contract.entries:daemon_child", {})
    await rt.sleep(1000.0)
    return 0


async def daemon_child(rt: Runtime, args: Args) -> int:
    """The daemon's child: the job's, so the run waits for it."""
    await rt.sleep(1.0)
    return 0
