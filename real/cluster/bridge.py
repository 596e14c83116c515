"""Separate network stacks on one machine for ``--launcher netns``: a hub namespace holding
a bridge, and one namespace per node joined to it by a veth pair, each with an address of
its own on a private subnet that exists only inside these namespaces.

Names follow :mod:`elastic_sim.real.faults.netns` (``es-<launcher pid>-<tag>``), so a run whose
launcher was SIGKILLed is cleaned up by the next run, as for partition namespaces.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from pathlib import Path

from elastic_sim.real.faults import netns

SUBNET = "10.213.0"
"""The bridge's /24: the hub is .1, node ``i`` is ``.(i + 2)``; it exists only inside the
run's namespaces."""
CLONE_NEWNET = 0x40000000


def node_address(index: int) -> str:
    """Node ``index``'s address on the bridge."""
    if not 0 <= index < 250:
        raise ValueError(f"--launcher netns runs at most 250 nodes (node {index})")
    return f"{SUBNET}.{index + 2}"


class Bridge:
    """The hub and ``count`` node namespaces of one run."""

    def __init__(self, count: int, tag: str) -> None:
        self.count = count
        prefix = f"{netns.Namespace.PREFIX}{os.getpid()}-"
        self.hub = f"{prefix}{tag}hub"
        self.nodes = [f"{prefix}{tag}n{i}" for i in range(count)]
        self.address = f"{SUBNET}.1"
        self._made: list[str] = []

    def create(self) -> None:
        """Make the namespaces, the bridge and the links (raises netns.CutError)."""
        netns.sweep_stale()
        run = netns._run  # one runner of ip/nft commands for the package
        for name in (self.hub, *self.nodes):
            run(["ip", "netns", "add", name])
            self._made.append(name)
            run(["ip", "-n", name, "link", "set", "lo", "up"])
        run(["ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.hub, "addr", "add", f"{self.address}/24", "dev", "br0"])
        run(["ip", "-n", self.hub, "link", "set", "br0", "up"])
        for i, name in enumerate(self.nodes):
            run(["ip", "-n", self.hub, "link", "add", f"v{i}", "type", "veth", "peer", "name",
                 "eth0", "netns", name])
            run(["ip", "-n", self.hub, "link", "set", f"v{i}", "master", "br0", "up"])
            run(["ip", "-n", name, "addr", "add", f"{node_address(i)}/24", "dev", "eth0"])
            run(["ip", "-n", name, "link", "set", "eth0", "up"])

    def prefix(self, index: int) -> list[str]:
        """Command prefix that runs a program in node ``index``'s namespace."""
        return ["ip", "netns", "exec", self.nodes[index]]

    def listen(self, port: int = 0) -> socket.socket:
        """A listening TCP socket inside the hub namespace, at the hub's address.

        A socket belongs to the namespace it was made in, so a short-lived thread enters
        the hub (setns changes only the calling thread), makes it, and exits."""
        made: list[socket.socket] = []
        errors: list[BaseException] = []

        def enter_and_listen() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(Path("/run/netns") / self.hub, os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns into the hub namespace")
                finally:
                    os.close(fd)
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.address, port))
                sock.listen(256)
                made.append(sock)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=enter_and_listen)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return made[0]

    def delete(self) -> None:
        """Remove every namespace made (the links and the bridge go with them)."""
        for name in reversed(self._made):
            try:
                netns._run(["ip", "netns", "del", name])
            except netns.CutError:
                pass
        self._made.clear()
