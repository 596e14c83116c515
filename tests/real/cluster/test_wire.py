"""The control channel: authenticated JSON frames, nothing else gets through."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from elastic_sim.real.cluster import wire

SECRET = "0123456789abcdef0123456789abcdef"


def _pair(secret_a: str = SECRET, secret_b: str = SECRET) -> tuple[wire.Channel, wire.Channel]:
    a, b = socket.socketpair()
    return wire.Channel(a, secret_a, "coordinator"), wire.Channel(b, secret_b, "node")


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
    sender = wire.Channel(a, SECRET, "node")
    sender.send({"op": "cmd", "sig": 9})
    raw = b.recv(65536)
    tampered = raw.replace(b'"sig":9', b'"sig":2')
    c, d = socket.socketpair()
    c.sendall(tampered)
    with pytest.raises(wire.AuthError, match="bad HMAC"):
        wire.Channel(d, SECRET, "coordinator").recv()


def test_a_replayed_frame_is_refused() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "node").send({"op": "cmd"})
    raw = b.recv(65536)
    c, d = socket.socketpair()
    c.sendall(raw + raw)
    receiver = wire.Channel(d, SECRET, "coordinator")
    assert receiver.recv() == {"op": "cmd"}
    with pytest.raises(wire.AuthError, match="out of sequence"):
        receiver.recv()


def test_a_reflected_frame_is_refused() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "coordinator").send({"op": "go"})
    raw = b.recv(65536)
    c, d = socket.socketpair()
    c.sendall(raw)
    with pytest.raises(wire.AuthError, match="reflected"):
        wire.Channel(d, SECRET, "coordinator").recv()


def test_an_oversized_frame_is_refused_before_it_is_read() -> None:
    c, d = socket.socketpair()
    c.sendall(struct.pack(">I", wire.MAX_FRAME + 1))
    with pytest.raises(wire.AuthError, match="larger"):
        wire.Channel(d, SECRET, "coordinator").recv()


def test_bodies_are_json_and_never_pickle() -> None:
    a, b = socket.socketpair()
    wire.Channel(a, SECRET, "node").send({"op": "x", "n": [1, 2]})
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
