"""What a host's kernel says for a process's connections (``Runtime.close_in_kernel``), the
``conn_reset`` fault reaching a protocol's own connections (``Runtime.on_conn_reset``), and
a restarted host's first process knowing it is a new incarnation (``ProcessInfo``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elastic_sim.faults.model import ConnReset, CrashHost, CrashProcess, CrashRestart
from elastic_sim.protocols.api import JSON, Message, Runtime
from tests.sim.simutil import L, make_world, simulate

M = "tests.sim.test_kernel_sockets"


class _Sockets:
    """One open connection to h1/main; answers everything after the exit with an RST."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def closing(self) -> Sequence[tuple[str, Mapping[str, JSON]]]:
        return [("h1/main", {"op": "fin", "from": self.rt.name})]

    def after_exit(self, msg: Message) -> Mapping[str, JSON] | None:
        return {"op": "rst", "to": str(msg.body.get("op"))}


async def sockets_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 holds a connection to h1 and waits; h1 records what arrives, and pings h0."""
    rt.record("started", incarnation=rt.info.incarnation)
    if rt.host == "h0":
        rt.close_in_kernel(_Sockets(rt))
        await rt.sleep(100.0)
        return 0
    rt.on_conn_reset(lambda hit: rt.record("reset", h0=hit("h0"), h1=hit("h1")))
    while True:
        msg = await rt.recv(timeout=10.0)
        rt.record("got", op=str(msg.body["op"]), src=msg.src)
        if msg.body["op"] == "fin":
            rt.send("h0/main", {"op": "data"})


def _got(events: Sequence[Any]) -> list[tuple[float, str, str]]:
    return [(round(e.t, 9), e.get("op"), e.get("src")) for e in events if e.kind == "got"]


def test_a_process_killed_while_its_host_lives_has_its_connections_closed_by_the_kernel() -> None:
    world = make_world(f"{M}:sockets_main", time_limit=8.0)
    _, events = simulate(world, [CrashProcess("k", 1.0, "h0/main")])
    # the FIN leaves h0 at the kill (2 L to h1); the segment h1 sends back is answered
    # with an RST (2 L there, 2 L back)
    assert _got(events) == [(1.0 + 2 * L, "fin", "h0/main"), (1.0 + 6 * L, "rst", "h0/main")]


def test_a_host_that_crashes_sends_nothing_for_its_processes() -> None:
    world = make_world(f"{M}:sockets_main", time_limit=8.0)
    _, events = simulate(world, [CrashHost("c", 1.0, "h0")])
    assert _got(events) == []


def test_a_conn_reset_tells_each_process_which_peer_hosts_it_hit() -> None:
    world = make_world(f"{M}:sockets_main", time_limit=8.0)
    _, events = simulate(world, [ConnReset("r", 1.0, a="h0", b="h1")])
    (reset,) = [e for e in events if e.kind == "reset"]
    assert reset.t == 1.0 and reset.get("h0") is True and reset.get("h1") is False


def test_a_restarted_hosts_first_process_is_a_new_incarnation() -> None:
    world = make_world(f"{M}:sockets_main", time_limit=8.0)
    _, events = simulate(world, [CrashRestart("cr", 1.0, "h0", 2.0)])
    started = [(e.t, e.get("incarnation")) for e in events
               if e.kind == "started" and e.host == "h0"]
    assert started == [(0.0, 0), (3.0, 1)]
    # while h0 was down nothing answered for it, and its new process has no closed sockets
    assert [op for _, op, _ in _got(events)] == []


async def refused_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 ends at once without sockets of its own; h1 connects to it every second with a
    ``refused`` body and records what comes back."""
    if rt.host == "h0":
        return 0

    async def listen() -> None:
        while True:
            msg = await rt.recv(timeout=10.0)
            rt.record("got", op=str(msg.body["op"]), src=msg.src, k=msg.body["k"])

    rt.spawn(listen(), "listen")
    for k in range(4):
        await rt.sleep(1.0)
        rt.send("h0/main", {"op": "syn", "k": k}, refused={"op": "rst", "k": k})
        rt.send("h0/none", {"op": "syn", "k": k}, refused={"op": "rst", "k": k})
    await rt.sleep(10.0)
    return 0


def test_a_connection_to_a_process_gone_from_a_live_host_is_refused() -> None:
    """A live host's kernel resets a connection to a process that ended there without
    sockets of its own (the sender's ``refused`` comes back, a round trip later); a name
    that never ran there, and a host that is down, stay silent."""
    world = make_world(f"{M}:refused_main", time_limit=8.0)
    _, events = simulate(world, [])
    got = [(round(e.t, 9), e.get("op"), e.get("src"), e.get("k")) for e in events
           if e.kind == "got"]
    assert got == [(1.0 + k + 4 * L, "rst", "h0/main", k) for k in range(4)]
    _, events = simulate(world, [CrashHost("c", 2.5, "h0")])
    got = [e.get("k") for e in events if e.kind == "got"]
    assert got == [0, 1]  # from the crash on, nothing answers for h0
