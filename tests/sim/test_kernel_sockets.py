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
