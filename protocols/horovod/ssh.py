"""The driver's ssh hop (horovodrun's spawner threads and their local ssh clients): a
worker is started by its host's task service on the driver's request, its exit status
comes back over the session (255 when the connection fails or dies), and stopping a host
terminates the spawners' local shells. A mixin of
:class:`~elastic_sim.protocols.horovod.driver.ElasticDriver`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api import Future
from elastic_sim.protocols.horovod.conn import (
    ConnectFailed,
    ConnectionDead,
    ConnectRefused,
    Keepalive,
)
from elastic_sim.protocols.horovod.hosts import SlotInfo

if TYPE_CHECKING:
    from collections.abc import Coroutine, Mapping

    from elastic_sim.protocols.api import Runtime, Task
    from elastic_sim.protocols.horovod.conn import Client
    from elastic_sim.protocols.horovod.settings import HorovodKnobs

SSH_ERROR = 255
"""ssh's exit status when the connection fails or dies."""
SIGKILL = 9


class SshHop:
    """Starting workers through their hosts' task services, and the spawners' shells
    (what the driver provides is declared for the type checker only)."""

    if TYPE_CHECKING:
        rt: Runtime
        k: HorovodKnobs
        client: Client
        service_of: Mapping[str, str]
        _exits: dict[int, tuple[str, Future[tuple[int, float]]]]
        spawners: list[Task[None]]
        silent_hosts: set[str]

        def _id(self) -> int: ...
        def wall(self) -> float: ...
        def members(self) -> list[str]: ...
        def _spawner(self, slot: SlotInfo, sid: int, fut: Future[tuple[int, float]]
                     ) -> Coroutine[Any, Any, None]: ...

    def _start_worker_process(self, slot: SlotInfo, rid: int) -> None:
        sid = self._id()
        fut: Future[tuple[int, float]] = self.rt.future()
        self._exits[sid] = (slot.hostname, fut)
        dst = self.service_of[slot.hostname]
        cid = self.client.open(dst, {"kind": "spawn", "sid": sid, "slot": slot.to_json(),
                                     "rendezvous": rid, "members": self.members()})
        self.rt.spawn(self._ssh(dst, cid, fut), f"ssh{sid}")
        self.spawners.append(self.rt.spawn(self._spawner(slot, sid, fut), f"spawner{sid}"))

    async def _ssh(self, dst: str, cid: int, fut: Future[tuple[int, float]]) -> None:
        """The local ssh client: connect (exit 255 when that is refused or times out), then
        wait for the remote command's exit status, or exit 255 when the session's TCP
        connection is reset or closed (the remote end died while its host lives: ssh
        learns at once) or TCP keepalive declares it dead (a host that died)."""
        ka = Keepalive(self.k.keepalive_time, self.k.keepalive_interval,
                       self.k.keepalive_probes)
        try:
            await self.client.connect(cid)
        except ConnectRefused:
            error: str | None = "connection refused"
        except ConnectFailed:
            error = "connect timed out"
        else:
            try:
                reply = await self.client.reply(cid, dst, ka)
                error = None
            except ConnectRefused:  # the session's TCP connection was reset or closed
                error = "connection closed"
            except ConnectionDead:
                error = "keepalive timed out"
        host = dst.partition("/")[0]
        if error in ("connect timed out", "keepalive timed out"):
            self.silent_hosts.add(host)
        else:  # it answered (its kernel at least)
            self.silent_hosts.discard(host)
        if error is None:
            out = (int(reply["code"]), float(reply["t"]))
        else:
            self.rt.record("hvd_ssh_failed", to=dst, error=error)
            out = (SSH_ERROR, self.wall())
        if not fut.done():
            fut.set_result(out)

    def _kill(self, host: str) -> None:
        """Terminate the host's spawners' local shells (each returns within the grace
        period whatever the remote host's state) and, through them, its workers."""
        addr = self.service_of.get(host)
        if addr is not None:
            self.rt.send(addr, {"op": "kill_workers", "grace": self.k.kill_grace})
        for sid in sorted(self._exits):
            where, fut = self._exits[sid]
            if where == host and not fut.done():
                self.rt.spawn(self._kill_shell(host, fut), f"kill_shell{sid}")

    async def _kill_shell(self, host: str, fut: Future[tuple[int, float]]) -> None:
        await self.rt.sleep(self.k.kill_grace)
        if not fut.done():
            self.silent_hosts.add(host)
            fut.set_result((-SIGKILL, self.wall()))
