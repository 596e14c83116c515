"""The control channel between a coordinator and its nodes: length-prefixed JSON frames,
each authenticated by an HMAC-SHA256 under the run's secret.

A frame is ``len(4 bytes, big-endian) | mac(32 bytes) | body``. The body is a JSON object
``{"from": role, "seq": n, "m": message}``: the role stops a frame from being reflected
back to its sender, the sequence number stops it from being replayed, and the MAC covers
both. A frame that fails any of these raises :class:`AuthError`; the receiver refuses the
connection. Bodies are parsed with :func:`json.loads` only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import threading
from pathlib import Path
from typing import Any

MAX_FRAME = 64 << 20
"""Largest body accepted (a node's trace travels in chunks well below it)."""

SECRET_ENV = "ES_SECRET"
"""Environment variable holding the run's secret (hex), for nodes started by a launcher."""
SECRET_FILE_ENV = "ES_SECRET_FILE"
"""Environment variable naming a file that holds the secret (a Kubernetes Secret mount)."""

Message = dict[str, Any]


class AuthError(ConnectionError):
    """A frame whose MAC, sender role or sequence number is wrong."""


class ChannelClosed(ConnectionError):
    """The peer closed the connection."""


def new_secret() -> str:
    """A fresh per-run secret (hex)."""
    return secrets.token_hex(32)


def secret_from_env(file: Path | None = None) -> str:
    """The run's secret from ``file``, ``$ES_SECRET_FILE`` or ``$ES_SECRET``; ValueError
    if none is set (a node never runs unauthenticated)."""
    path = file or (Path(os.environ[SECRET_FILE_ENV]) if SECRET_FILE_ENV in os.environ else None)
    if path is not None:
        text = path.read_text(encoding="utf-8").strip()
    else:
        text = os.environ.get(SECRET_ENV, "").strip()
    if len(text) < 16:
        raise ValueError(
            f"no run secret: set {SECRET_ENV} or {SECRET_FILE_ENV} (at least 16 characters), "
            "or pass --secret-file"
        )
    return text


class Channel:
    """One authenticated connection. ``send`` may be called from any thread; ``recv``
    from one thread at a time."""

    def __init__(self, sock: socket.socket, secret: str, role: str) -> None:
        self.sock = sock
        self._key = secret.encode()
        self.role = role
        self._out = 0
        self._in = 0
        self._lock = threading.Lock()

    def send(self, msg: Message) -> None:
        """Send one message (raises OSError if the connection is gone)."""
        with self._lock:
            body = json.dumps({"from": self.role, "seq": self._out, "m": msg},
                              separators=(",", ":")).encode()
            self._out += 1
            mac = hmac.new(self._key, body, hashlib.sha256).digest()
            self.sock.sendall(struct.pack(">I", len(body)) + mac + body)

    def recv(self) -> Message:
        """The next message; :class:`ChannelClosed` at EOF, :class:`AuthError` on a bad
        frame."""
        (size,) = struct.unpack(">I", self._read(4))
        if size > MAX_FRAME:
            raise AuthError(f"frame of {size} bytes is larger than {MAX_FRAME}")
        mac = self._read(32)
        body = self._read(size)
        if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()):
            raise AuthError("bad HMAC (wrong secret, or the frame was altered)")
        try:
            obj = json.loads(body)
        except ValueError as exc:
            raise AuthError(f"authenticated frame is not JSON: {exc}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("m"), dict):
            raise AuthError("authenticated frame has no message object")
        if obj.get("from") == self.role:
            raise AuthError("a frame of our own role came back (reflected)")
        if obj.get("seq") != self._in:
            raise AuthError(f"frame {obj.get('seq')!r} out of sequence (expected {self._in})")
        self._in += 1
        msg: Message = obj["m"]
        return msg

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ChannelClosed("connection closed")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
