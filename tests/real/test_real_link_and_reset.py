"""Link faults and connection resets in real mode, inside the run's network namespace.

A link fault steers the packets of the connections between its two hosts (nftables sets
their priority) to an HTB class whose leaf is a ``netem`` qdisc with the fault's delay,
loss, duplication and reordering; a connection reset aborts the established connections
between its hosts (``ss -K`` on what the conntrack table lists), so the opening end sees an
RST while a new connection is accepted as before. Where the kernel has no ``netem`` (this
project's sandbox kernel lacks it), a link fault is refused at validation, saying so."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.faults.model import ConnReset, LinkFault
from elastic_sim.protocols.api import Runtime, StoreConnectionError
from elastic_sim.real.faults import connreset, netns, shaping
from elastic_sim.real.faults.injector import why_unsupported
from elastic_sim.trace import TraceEvent
from elastic_sim.world import HostSpec, World
from tests.real.test_real_partition import SENDS, needs_cut

HOSTS = ("h0", "h1", "h2")
ADDRS = tuple(netns.host_address(i) for i in range(3))


def _world(entry: str) -> World:
    return World(hosts=tuple(HostSpec(h) for h in HOSTS),
                 entry=f"tests.real.test_real_link_and_reset:{entry}", args={},
                 time_limit=60.0)


def _own_namespaces() -> list[str]:
    return [n for n in netns.existing() if n.startswith(f"{netns.Namespace.PREFIX}{os.getpid()}-")]


# -- as rules and commands (pure) --------------------------------------------------------------


def test_a_link_fault_steers_both_ways_of_the_connections_between_its_hosts_only() -> None:
    fault = LinkFault(id="l", at=1.0, a="h0", b="h2", delay=0.2, duration=2.0)
    steers = shaping.steers(fault, HOSTS, ADDRS, 0x11)
    # what h0 opened to h2 and what h2 opened to h0; h1's connections pass unshaped
    assert steers == [shaping.Steer(1, "127.0.1.3", 0x11), shaping.Steer(3, "127.0.1.1", 0x11)]
    text = netns.ruleset(3, [], steers)
    assert "ct mark 1 ct original ip daddr 127.0.1.3 meta priority set 1:11" in text
    wild = shaping.steers(LinkFault(id="w", at=1.0, delay=0.1, duration=1.0), HOSTS, ADDRS, 16)
    assert len(wild) == 6  # every ordered pair of distinct hosts, never a host with itself


def test_netem_gets_the_fault_s_delay_reorder_window_loss_and_duplication() -> None:
    fault = LinkFault(id="l", at=1.0, delay=0.1, reorder=0.04, loss=0.25, duplicate=0.01,
                      duration=2.0)
    # up to `reorder` extra: uniform jitter of half of it around delay + half of it
    assert shaping.netem_args(fault) == ["delay", "120.000ms", "20.000ms", "loss",
                                         "25.0000%", "duplicate", "1.0000%"]
    assert shaping.netem_args(LinkFault(id="d", at=0.0, delay=0.5, duration=1.0)) == [
        "delay", "500.000ms"]
    (cls, leaf) = shaping.class_commands(0x1A, fault)
    assert cls[cls.index("classid") + 1] == "1:1a" and leaf[leaf.index("parent") + 1] == "1:1a"
    assert shaping.heal_commands(0x1A)[0][-2:] == ["delay", "0ms"]


CONNTRACK = """\
ipv4     2 tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.1.1 sport=40001 dport=5000 \
src=127.0.1.1 dst=127.0.0.1 sport=5000 dport=40001 [ASSURED] mark=3 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.1.1 sport=40002 dport=5000 \
src=127.0.1.1 dst=127.0.0.1 sport=5000 dport=40002 [ASSURED] mark=2 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.1.3 sport=40003 dport=6000 \
src=127.0.1.3 dst=127.0.0.1 sport=6000 dport=40003 [ASSURED] mark=1 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.1.3 sport=40004 dport=6001 \
src=127.0.1.3 dst=127.0.0.1 sport=6001 dport=40004 [ASSURED] mark=3 zone=0 use=2
ipv4     2 tcp      6 119 TIME_WAIT src=127.0.0.1 dst=127.0.1.1 sport=40005 dport=5000 \
src=127.0.1.1 dst=127.0.0.1 sport=5000 dport=40005 [ASSURED] mark=3 zone=0 use=2
ipv4     2 udp      17 29 src=127.0.0.1 dst=127.0.1.1 sport=5353 dport=5353 mark=3 use=2
"""


def test_a_reset_picks_the_established_connections_between_its_hosts_either_way() -> None:
    conns = connreset.parse_conntrack(CONNTRACK)
    assert len(conns) == 4  # TIME_WAIT and UDP are not established TCP connections
    picked = connreset.between(ConnReset(id="r", at=1.0, a="h0", b="h2"), conns, HOSTS, ADDRS)
    # h2 -> h0 and h0 -> h2; not h1 -> h0, not h2's connection to itself
    assert [(c.sport, c.mark) for c in picked] == [(40001, 3), (40003, 1)]
    (expr,) = connreset.kill_filters(picked)
    assert expr == ("( src 127.0.1.1:5000 and dst 127.0.0.1:40001 ) or "
                    "( src 127.0.1.3:6000 and dst 127.0.0.1:40003 )")
    every = connreset.between(ConnReset(id="r", at=1.0), conns, HOSTS, ADDRS)
    assert len(every) == 3


# -- validation ---------------------------------------------------------------------------------


def test_a_link_fault_is_refused_naming_what_the_machine_lacks_or_accepted() -> None:
    why = why_unsupported(LinkFault(id="l", at=1.0, delay=0.1, duration=1.0))
    lacking = shaping.missing()
    if lacking:
        assert why.startswith("link faults are shaped with tc netem") and lacking in why
    else:
        assert why == ""


def test_without_the_tools_both_are_refused_with_the_reason(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    lacking = netns.missing()  # no ip/nft (or no root)
    assert lacking
    link = why_unsupported(LinkFault(id="l", at=1.0, delay=0.1, duration=1.0))
    assert link.startswith("link faults are shaped with tc netem") and lacking in link
    reset = why_unsupported(ConnReset(id="r", at=1.0))
    assert reset.startswith("connection resets abort") and lacking in reset


# -- for real -----------------------------------------------------------------------------------


def _steering_class_counts(tmp_path: Path) -> tuple[int, int]:
    """Packets that crossed a link fault's class with h0 <-> h2 traffic, then with h0 <->
    h1 traffic (netem's leaf replaced by a plain fifo, so this runs where netem is not)."""
    ns = netns.Namespace(HOSTS, "steer")
    fault = LinkFault(id="l", at=0.0, a="h0", b="h2", delay=0.1, duration=1.0)
    plain = [argv if "netem" not in argv else [*argv[:argv.index("netem")], "pfifo"]
             for argv in shaping.class_commands(shaping.FIRST_CLASS, fault)]
    script = ("import os, socket, sys; os.setgid(int(sys.argv[1])); "
              "c = socket.create_connection((sys.argv[2], int(sys.argv[3]))); "
              "c.sendall(b'x' * 4000); c.close()")
    counts = []
    try:
        ns.create()
        ns._tc(shaping.root_commands())
        ns._tc(plain)
        ns._steers[fault.id] = shaping.steers(fault, HOSTS, ADDRS, shaping.FIRST_CLASS)
        ns._load()
        for src in ("h2", "h1"):
            server = subprocess.Popen(
                [*ns.prefix(), "python3", "-c",
                 "import socket, sys; s = socket.create_server((sys.argv[1], 7000)); "
                 "c, _ = s.accept(); print(len(c.recv(100000)), flush=True)", ADDRS[0]],
                stdout=subprocess.PIPE)
            for _ in range(50):  # until it listens
                if subprocess.run([*ns.prefix(), "python3", "-c", script,
                                   str(ns.gid(src)), ADDRS[0], "7000"],
                                  capture_output=True, check=False).returncode == 0:
                    break
            server.communicate(timeout=30)
            shown = subprocess.run([*ns.prefix(), "tc", "-s", "class", "show", "dev", "lo"],
                                   capture_output=True, check=True).stdout.decode()
            counts.append(int(shown.split(" pkt")[0].rsplit(" ", 1)[-1]))
    finally:
        ns.delete()
    return counts[0], counts[1] - counts[0]


@needs_cut
def test_the_link_fault_s_class_carries_only_the_traffic_between_its_hosts(
        tmp_path: Path) -> None:
    if subprocess.run(["sh", "-c", "command -v tc"], capture_output=True).returncode:
        pytest.skip("no tc")
    across, beside = _steering_class_counts(tmp_path)
    assert across >= 4 and beside == 0, (across, beside)
    assert _own_namespaces() == []


async def timed_messages(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h1 and h2 stream numbered, timestamped messages to h0 (one every 0.1 s)."""
    from tests.real.test_real_partition import cut_messages

    return await cut_messages(rt, args)


@needs_cut
@pytest.mark.skipif(bool(shaping.missing()), reason=f"no link shaping: {shaping.missing()}")
def test_a_link_delay_delays_messages_between_exactly_its_hosts(tmp_path: Path) -> None:
    from elastic_sim import real

    fault = LinkFault(id="slow", at=1.0, a="h0", b="h2", delay=0.4, duration=1.5)
    events: list[TraceEvent] = []
    result = real.run(_world("timed_messages"), [fault], 7, tmp_path / "run", events.append)
    assert _own_namespaces() == []
    assert [r.fired for r in result.faults] == [True]
    phases = [(e.data["phase"], e.t) for e in events if e.kind == "fault"]
    assert [p for p, _ in phases] == ["start", "heal"]
    start, heal = phases[0][1], phases[1][1]
    lag = {"h1/main": [], "h2/main": []}
    for e in events:
        if e.kind == "got" and start + 0.05 <= float(e.data["sent"]) < heal - 0.05:
            lag[str(e.data["src"])].append(e.t - float(e.data["sent"]))
    assert len(lag["h2/main"]) >= 5 and min(lag["h2/main"]) >= 0.35, lag
    assert lag["h1/main"] and max(lag["h1/main"]) < 0.2, lag
    for src in lag:  # nothing lost: the delay only
        assert sorted(int(e.data["seq"]) for e in events
                      if e.kind == "got" and e.data["src"] == src) == list(range(SENDS))


async def reset_store(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 hosts a store; h1 and h2 connect, then call it every 0.1 s until a call fails
    (or 4 s pass), then open a new client and call again."""
    if rt.host == "h0":
        addr = await rt.host_store(0)
        for peer in ("h1/main", "h2/main"):
            rt.send(peer, {"addr": addr})
        for _ in range(2):
            await rt.recv(timeout=30)
        return 0
    addr = str((await rt.recv(timeout=30)).body["addr"])
    store = await rt.connect_store(addr, timeout=10)
    await store.set(f"k-{rt.host}", b"v")
    rt.record("connected")
    for _ in range(40):
        await rt.sleep(0.1)
        try:
            await store.get(f"k-{rt.host}")
        except StoreConnectionError as exc:
            rt.record("old_failed", error=str(exc))
            break
    fresh = await rt.connect_store(addr, timeout=10)
    rt.record("new_ok", value=(await fresh.get(f"k-{rt.host}")).decode())
    rt.send("h0/main", {"done": True})
    return 0


@needs_cut
def test_a_reset_fails_an_established_store_client_and_a_new_one_connects(
        tmp_path: Path) -> None:
    from elastic_sim import real

    if not importlib.util.find_spec("torch"):
        pytest.skip("needs torch")
    fault = ConnReset(id="rst", at=2.5, a="h0", b="h2")
    events: list[TraceEvent] = []
    result = real.run(_world("reset_store"), [fault], 7, tmp_path / "run", events.append)
    assert _own_namespaces() == []
    assert result.exit_codes == {"h0/main": 0, "h1/main": 0, "h2/main": 0}
    assert [r.fired for r in result.faults] == [True]
    (at,) = [e.t for e in events if e.kind == "fault" and e.data["phase"] == "start"]
    by = {(e.host, e.kind): e for e in events if e.kind in ("connected", "old_failed",
                                                            "new_ok")}
    assert by[("h2", "connected")].t < at <= by[("h2", "old_failed")].t < at + 0.5
    assert ("h1", "old_failed") not in by  # h1 <-> h0 is not reset
    assert by[("h1", "new_ok")].data["value"] == by[("h2", "new_ok")].data["value"] == "v"
