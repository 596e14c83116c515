"""The control channel between a coordinator and its nodes: length-prefixed JSON frames,
each authenticated by an HMAC-SHA256 under the run's secret.

A connection opens with each end sending ``MAGIC`` and a fresh random nonce
(:func:`open_channel`); the two nonces, the coordinator's first, are the connection's
binding. A frame is then ``len(4 bytes, big-endian) | mac(32 bytes) | body``, the MAC an
HMAC-SHA256 under the run's secret of the binding and the body. The body is a JSON object
``{"from": role, "seq": n, "m": message}``: the role stops a frame from being reflected
back to its sender, the sequence number from being replayed within the connection, and
the binding from being replayed on another one: a frame recorded in an earlier run (or on
another connection of this one) fails its MAC even under the same secret. A frame that
fails any of these raises :class:`AuthError`; the receiver refuses the connection. Bodies
are parsed with :func:`json.loads` only.

No connection can hold an end without bound: the opening and the first frame must arrive
within the deadline the receiver gives, and every later frame, once its first byte is
in, within :data:`FRAME_TIMEOUT` (:class:`FrameTimeout`, a ``TimeoutError``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

MAX_FRAME = 64 << 20
"""Largest body accepted (a node's trace travels in chunks well below it)."""
MAGIC = b"ES-CTL1\n"
"""What each end of a control connection sends first, before its nonce."""
NONCE_BYTES = 16
"""Random bytes each end adds to a connection's binding."""
FRAME_TIMEOUT = 30.0
"""Seconds a frame may take to arrive whole once its first byte has (a trace chunk of a
few megabytes over a slow link takes well under it)."""

SECRET_ENV = "ES_SECRET"
"""Environment variable holding the run's secret (hex), for nodes started by a launcher."""
SECRET_FILE_ENV = "ES_SECRET_FILE"
"""Environment variable naming a file that holds the secret (a Kubernetes Secret mount)."""

Message = dict[str, Any]


class AuthError(ConnectionError):
    """A frame whose MAC, sender role or sequence number is wrong."""


class ChannelClosed(ConnectionError):
    """The peer closed the connection."""


class FrameTimeout(TimeoutError):
    """The peer did not send a whole frame (or the opening) within its deadline."""


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


def open_channel(sock: socket.socket, secret: str, role: str, timeout: float) -> Channel:
    """Open a control connection on ``sock`` as ``role`` (``coordinator`` or ``node``):
    send this end's nonce, read the peer's within ``timeout`` seconds
    (:class:`FrameTimeout`, or :class:`AuthError` for anything but an opening)."""
    deadline = time.monotonic() + timeout
    mine = secrets.token_bytes(NONCE_BYTES)
    sock.sendall(MAGIC + mine)
    opening = _read_by(sock, len(MAGIC) + NONCE_BYTES, deadline, "the opening")
    if not opening.startswith(MAGIC):
        raise AuthError("the connection did not open as a control channel")
    theirs = opening[len(MAGIC):]
    binding = mine + theirs if role == "coordinator" else theirs + mine
    return Channel(sock, secret, role, binding)


def _read_by(sock: socket.socket, n: int, deadline: float | None, what: str) -> bytes:
    """``n`` bytes from ``sock`` by ``deadline`` (monotonic; None: no limit), waiting with
    ``select`` so the socket stays blocking for the thread that sends on it."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise FrameTimeout(f"{what} did not arrive whole in time ({len(buf)} of "
                                   f"{n} bytes)")
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ChannelClosed("connection closed")
        buf += chunk
    return bytes(buf)


class Channel:
    """One authenticated connection (made by :func:`open_channel`). ``send`` may be
    called from any thread; ``recv`` from one thread at a time."""

    def __init__(self, sock: socket.socket, secret: str, role: str, binding: bytes) -> None:
        if len(binding) != 2 * NONCE_BYTES:
            raise ValueError("a channel is bound to both ends' nonces")
        self.sock = sock
        self._key = secret.encode()
        self._binding = binding
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
            self.sock.sendall(struct.pack(">I", len(body)) + self._mac(body) + body)

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, self._binding + body, hashlib.sha256).digest()

    def recv(self, timeout: float | None = None) -> Message:
        """The next message, whole within ``timeout`` seconds (None: its first byte may
        take any time, the rest :data:`FRAME_TIMEOUT`); :class:`ChannelClosed` at EOF,
        :class:`AuthError` on a bad frame, :class:`FrameTimeout` past the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        first = _read_by(self.sock, 1, deadline, "a frame")
        if deadline is None:
            deadline = time.monotonic() + FRAME_TIMEOUT
        (size,) = struct.unpack(">I", first + _read_by(self.sock, 3, deadline, "a frame"))
        if size > MAX_FRAME:
            raise AuthError(f"frame of {size} bytes is larger than {MAX_FRAME}")
        mac = _read_by(self.sock, 32, deadline, "a frame")
        body = _read_by(self.sock, size, deadline, "a frame")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise AuthError("bad HMAC (wrong secret, another run or connection's frame, "
                            "or an altered one)")
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

    def close(self) -> None:
        """Close the connection (idempotent)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
