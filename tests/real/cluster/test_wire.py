"""The control channel: authenticated JSON frames bound to their connection, each with a
deadline; nothing else gets through."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from elastic_sim.real.cluster import wire

SECRET = "0123456789abcdef0123456789abcdef"
BINDING = bytes(range(2 * wire.NONCE_BYTES))
"""A binding for channels made directly (a connection's own comes from its opening)."""


def _pair(secret_a: str = SECRET, secret_b: str = SECRET) -> tuple[wire.Channel, wire.Channel]:
    """Both ends of one connection, opened as the coordinator and a node open theirs."""
    a, b = socket.socketpair()
    made: list[wire.Channel] = []
    opener = threading.Thread(target=lambda: made.append(
        wire.open_channel(b, secret_b, "node", 5.0)))
    opener.start()
    coord = wire.open_channel(a, secret_a, "coordinator", 5.0)
    opener.join()
    return coord, made[0]


def test_messages_arrive_in_order_and_intact() -> None:
    coord, node = _pair()
    node.send({"op": "hello", "index": 0})
    node.send({"op": "addr", "value": "10.0.0.2:4000\n"})
    assert coord.recv() == {"op": "hello", "index": 0}
    assert coord.recv() == {"op": "addr", "value": "10.0.0.2:4000\n"}


def test_a_frame_under_another_secret_is_refused() -> None:
    coord, node = _pair(secret_b="ffffffffffffffffffffffffffffffff")
    node.send({"op": "hello"})
    with pytest.raises(wire.AuthError, match="bad HMAC"):
        coord.recv()


def test_an_altered_frame_is_refused() -> None:
    a, b = socket.socketpair()
    sender = wire.Channel(a, SECRET, "node", BINDING)
    sender.send({"op": "cmd", "sig": 9})
    raw = b.recv(65536)
    tampered = raw.replace(b'"sig":9', b'"sig":2')
    c, d = socket.socketpair()
    c.sendall(tampered)
    with pytest.raises(wire.AuthError, match="bad HMAC"):
        wire.Channel(d, SECRET, "coordinator", BINDING).recv()


def test_a_replayed_frame_is_refused() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "node", BINDING).send({"op": "cmd"})
    raw = b.recv(65536)
    c, d = socket.socketpair()
    c.sendall(raw + raw)
    receiver = wire.Channel(d, SECRET, "coordinator", BINDING)
    assert receiver.recv() == {"op": "cmd"}
    with pytest.raises(wire.AuthError, match="out of sequence"):
        receiver.recv()


def test_a_reflected_frame_is_refused() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "coordinator", BINDING).send({"op": "go"})
    raw = b.recv(65536)
    c, d = socket.socketpair()
    c.sendall(raw)
    with pytest.raises(wire.AuthError, match="reflected"):
        wire.Channel(d, SECRET, "coordinator", BINDING).recv()


def test_an_oversized_frame_is_refused_before_it_is_read() -> None:
    c, d = socket.socketpair()
    c.sendall(struct.pack(">I", wire.MAX_FRAME + 1))
    with pytest.raises(wire.AuthError, match="larger"):
        wire.Channel(d, SECRET, "coordinator", BINDING).recv()


def test_bodies_are_json_and_never_pickle() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "node", BINDING).send({"op": "x", "n": [1, 2]})
    raw = b.recv(65536)
    body = raw[4 + 32:]
    assert json.loads(body) == {"from": "node", "seq": 0, "m": {"op": "x", "n": [1, 2]}}


def test_a_node_needs_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(wire.SECRET_ENV, raising=False)
    monkeypatch.delenv(wire.SECRET_FILE_ENV, raising=False)
    with pytest.raises(ValueError, match="no run secret"):
        wire.secret_from_env()
    monkeypatch.setenv(wire.SECRET_ENV, SECRET)
    assert wire.secret_from_env() == SECRET


# -- another run's frames (issue 34, item 2) ---------------------------------------------

def test_a_frame_recorded_on_another_connection_is_refused_under_the_same_secret() -> None:
    """A node's HELLO recorded in an earlier run (the same secret file reused) and played
    to a later run's coordinator fails its MAC: each connection's nonces are in it."""
    earlier_coord, earlier_node = _pair()
    raw_side = earlier_coord.sock
    earlier_node.send({"op": "hello", "index": 0, "count": 2, "address": "127.0.0.1"})
    recorded = raw_side.recv(65536)
    coord_sock, attacker = socket.socketpair()
    attacker.sendall(wire.MAGIC + bytes(wire.NONCE_BYTES))  # an opening of its own
    coord = wire.open_channel(coord_sock, SECRET, "coordinator", 5.0)
    attacker.sendall(recorded)
    with pytest.raises(wire.AuthError, match="bad HMAC"):
        coord.recv(timeout=5.0)


def test_a_connection_that_does_not_open_as_a_control_channel_is_refused() -> None:
    a, b = socket.socketpair()
    b.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(wire.AuthError, match="did not open"):
        wire.open_channel(a, SECRET, "coordinator", 5.0)


# -- deadlines (issue 34, item 3) --------------------------------------------------------

def _trickle(sock: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    for i in range(len(data)):
        if stop.wait(every):
            return
        try:
            sock.sendall(data[i:i + 1])
        except OSError:
            return


def _trickling(msg: dict[str, object], every: float) -> tuple[wire.Channel, threading.Event]:
    """A coordinator's channel to which a node's frame of ``msg`` comes one byte every
    ``every`` seconds (until the event is set)."""
    a, b = socket.socketpair()
    wire.Channel(b, SECRET, "node", BINDING).send(msg)
    frame = a.recv(65536)
    c, d = socket.socketpair()
    stop = threading.Event()
    threading.Thread(target=_trickle, args=(c, frame, every, stop), daemon=True).start()
    return wire.Channel(d, SECRET, "coordinator", BINDING), stop


def test_a_first_frame_that_trickles_in_is_cut_off_at_its_deadline() -> None:
    """One byte every 0.2 s keeps a connection busy forever if each read has its own
    timeout; the first frame's deadline is for the whole frame."""
    chan, stop = _trickling({"op": "hello", "pad": "x" * 200}, 0.2)
    started = time.monotonic()
    with pytest.raises(wire.FrameTimeout):
        chan.recv(timeout=1.0)
    stop.set()
    assert time.monotonic() - started < 2.0


def test_an_opening_that_never_comes_is_cut_off_at_its_deadline() -> None:
    a, _b = socket.socketpair()
    started = time.monotonic()
    with pytest.raises(wire.FrameTimeout):
        wire.open_channel(a, SECRET, "coordinator", 0.5)
    assert time.monotonic() - started < 1.5


def test_a_later_frame_has_a_deadline_once_its_first_byte_is_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Between frames a peer may be quiet for as long as the run lasts; a frame begun
    must end within FRAME_TIMEOUT."""
    monkeypatch.setattr(wire, "FRAME_TIMEOUT", 0.5)
    chan, stop = _trickling({"op": "trace", "lines": ["x" * 100]}, 0.1)
    started = time.monotonic()
    with pytest.raises(wire.FrameTimeout):
        chan.recv()
    stop.set()
    assert time.monotonic() - started < 1.5
