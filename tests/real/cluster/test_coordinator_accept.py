"""The coordinator's door: it takes each node's HELLO over a channel bound to that
connection, so a HELLO recorded in an earlier run with the same secret is refused and the
real node still gets in; and a connection that trickles its bytes holds the door for its
first frame's deadline only."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from elastic_sim.real.cluster import coordinator, wire
from elastic_sim.world import HostSpec, World

SECRET = "0123456789abcdef0123456789abcdef"
HELLO = {"op": "hello", "index": 0, "count": 1, "address": "127.0.0.1", "machine": "m"}


def _door(tmp_path: Path) -> tuple[coordinator.Coordinator, int, list[str]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    world = World(hosts=(HostSpec("h0"),), entry="x:y", args={})
    said: list[str] = []
    coord = coordinator.Coordinator(world, [], 0, tmp_path, listener, SECRET, 1, said.append)
    return coord, listener.getsockname()[1], said


def _node(port: int) -> wire.Channel:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(None)
    return wire.open_channel(sock, SECRET, "node", 10.0)


def _accepting(coord: coordinator.Coordinator) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def accept() -> None:
        try:
            coord._accept()
        except BaseException as exc:  # the test says what it was
            errors.append(exc)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return thread, errors


def test_an_earlier_runs_hello_is_refused_and_the_real_node_gets_in(tmp_path: Path) -> None:
    # An earlier run, same secret: its node 0's HELLO, as it went over the wire.
    earlier, port, _ = _door(tmp_path / "earlier")
    thread, _ = _accepting(earlier)
    spy = _node(port)
    spy.send(HELLO)
    thread.join(10)
    assert [n.index for n in earlier.nodes] == [0]
    a, b = socket.socketpair()
    wire.Channel(b, SECRET, "node", spy._binding).send(HELLO)
    recorded = a.recv(65536)
    # This run: the recording is played first, then the real node comes.
    coord, port, said = _door(tmp_path / "now")
    thread, errors = _accepting(coord)
    rogue = socket.create_connection(("127.0.0.1", port), timeout=10)
    rogue.sendall(wire.MAGIC + bytes(wire.NONCE_BYTES) + recorded)
    got = b""
    while chunk := rogue.recv(65536):  # the coordinator's opening, then it closes
        got += chunk
    assert got.startswith(wire.MAGIC) and len(got) == len(wire.MAGIC) + wire.NONCE_BYTES
    real = _node(port)
    real.send(HELLO)
    thread.join(10)
    assert not errors and [n.index for n in coord.nodes] == [0]
    assert any("bad HMAC" in line for line in said), said


def test_a_trickling_connection_holds_the_door_only_for_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator, "FIRST_FRAME_TIMEOUT", 1.0)
    coord, port, said = _door(tmp_path)
    thread, errors = _accepting(coord)
    slow = socket.create_connection(("127.0.0.1", port), timeout=10)
    stop = threading.Event()

    def trickle() -> None:  # one byte of a plausible opening every 0.2 s, for ever
        for byte in (wire.MAGIC + bytes(wire.NONCE_BYTES)) * 100:
            if stop.wait(0.2):
                return
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    time.sleep(0.3)
    started = time.monotonic()
    real = _node(port)
    real.send(HELLO)
    thread.join(10)
    waited = time.monotonic() - started
    stop.set()
    assert not errors and [n.index for n in coord.nodes] == [0]
    assert waited < 3.0, waited
    assert any("FrameTimeout" in line for line in said), said
