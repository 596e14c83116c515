"""The checkpoint transport that heals a recovering rank (torchft/checkpointing/
http_transport.py ``HTTPTransport``, the Manager's default).

Every rank serves its state over "HTTP". A source stages its state for the quorum's max
step when the quorum names recovering peers (``send_checkpoint``), which allows serving;
its should_commit disallows serving again, and waits for the transfers under way: the
read-write lock of upstream, whose timeout (the Manager's ``timeout``) raises in the
source's should_commit if a transfer outlasts it. A recovering rank asks the source's
Manager server for the source rank's address (``checkpoint_metadata``), then GETs the
state of the max step: a request made while the source does not serve waits for it, one
for another step than the source serves is refused (HTTP 400).

The bytes travel over a point-to-point group of the two ranks formed through the
source's store, so the transfer takes what the state's size and the link between their
hosts make it take, and fails when either end dies (upstream: a socket error).
"""

from __future__ import annotations

import json

from elastic_sim.protocols.api import (
    CollectiveError,
    Message,
    OperationTimeout,
    Runtime,
    Store,
    StoreError,
)
from elastic_sim.protocols.static.training import TrainState
from elastic_sim.protocols.sync import Event
from elastic_sim.protocols.torchft.rpc import Endpoint, RpcError, address


class CheckpointError(Exception):
    """A heal's transfer failed (the request was refused or timed out, or a side died)."""


class ReadWriteLock:
    """Upstream's ``RWLock`` (readers share it, a writer waits for them to leave), with
    its timeout on every acquire (:class:`TimeoutError`)."""

    def __init__(self, rt: Runtime, timeout: float) -> None:
        self.rt = rt
        self.timeout = timeout
        self.readers = 0
        self.writer = False
        self._changed = Event(rt)

    async def _until(self, what: str) -> None:
        deadline = self.rt.monotonic() + self.timeout
        while not self._free(what):
            left = deadline - self.rt.monotonic()
            if left <= 0:
                raise TimeoutError(f"Timed out waiting for {what} after {self.timeout:g} seconds")
            self._changed.clear()
            try:
                await self._changed.wait(left)
            except OperationTimeout:
                pass

    def _free(self, what: str) -> bool:
        return not self.writer if what == "rlock" else not self.writer and not self.readers

    async def r_acquire(self) -> None:
        """Join the readers once no writer holds it."""
        await self._until("rlock")
        self.readers += 1

    def r_release(self) -> None:
        """Leave the readers."""
        self.readers -= 1
        self._changed.set()

    async def w_acquire(self) -> None:
        """Hold it alone once every reader left."""
        await self._until("wlock")
        self.writer = True

    def w_release(self) -> None:
        """Let readers in again."""
        self.writer = False
        self._changed.set()


class CheckpointServer:
    """One rank's checkpoint server: what it stages, and the transfers it serves."""

    def __init__(self, rt: Runtime, ep: Endpoint, store: Store, store_address: str,
                 timeout: float, state_bytes: int) -> None:
        self.rt = rt
        self.ep = ep
        self.store = store
        self.store_address = store_address
        self.timeout = timeout
        self.state_bytes = state_bytes
        self.port = rt.rng.randrange(30000, 60000)  # an HTTP server bound to port 0
        self.address = address(rt.name, self.port)
        self.step = -1
        self.staged: tuple[TrainState, dict[str, int]] | None = None
        self.lock = ReadWriteLock(rt, timeout)
        self.lock.writer = True  # created disallowed
        self.disallowed = True
        ep.serve(self.port, "ckpt_get", self._get)

    def metadata(self) -> str:
        """Where to fetch from (upstream: ``http://host:port/checkpoint/``)."""
        return json.dumps({"addr": self.address, "store": self.store_address})

    def send_checkpoint(self, step: int, state: TrainState, torchft: dict[str, int]) -> None:
        """Stage ``state`` of ``step`` and allow serving it."""
        self.staged = (state, dict(torchft))
        self.step = step
        if self.disallowed:
            self.disallowed = False
            self.lock.w_release()

    async def disallow(self) -> None:
        """Stop serving once the transfers under way are done (TimeoutError past the
        lock's timeout)."""
        if not self.disallowed:
            self.disallowed = True
            await self.lock.w_acquire()

    def _get(self, msg: Message) -> None:
        self.rt.spawn(self._serve(msg), "checkpoint.serve")

    async def _serve(self, msg: Message) -> None:
        try:
            await self.lock.r_acquire()
        except TimeoutError as exc:
            self.ep.answer(msg, {"error": f"500 {exc}"})
            return
        try:
            step = int(msg.body["step"])
            if step != self.step or self.staged is None:
                self.ep.answer(msg, {"error": f"400 invalid checkpoint requested, serving "
                                              f"{self.step} but got step={step}"})
                return
            state, torchft = self.staged
            blob = state.to_bytes(self.state_bytes)
            name = str(msg.body["group"])
            self.ep.answer(msg, {"nbytes": len(blob), "params": len(state.params),
                                 "torchft": torchft})
            group = await self.rt.new_group(self.store, name, 0, 2, self.timeout)
            try:
                await group.send(1, blob)
            finally:
                group.abort()
        except (CollectiveError, StoreError):
            pass  # the reader sees its own end of it fail
        finally:
            self.lock.r_release()


async def recv_checkpoint(rt: Runtime, ep: Endpoint, metadata: str, step: int, name: str,
                          timeout: float) -> tuple[TrainState, dict[str, int]]:
    """Fetch the state of ``step`` from the checkpoint server ``metadata`` names, over a
    transfer group called ``name``; :class:`CheckpointError` if it fails."""
    where = json.loads(metadata)
    try:
        reply = await ep.call(str(where["addr"]), "ckpt_get", {"step": step, "group": name},
                              timeout)
        store = await rt.connect_store(str(where["store"]), timeout)
        group = await rt.new_group(store, name, 1, 2, timeout)
        try:
            blob = await group.recv(0, int(reply["nbytes"]))
        finally:
            group.abort()
    except (RpcError, StoreError, CollectiveError) as exc:
        raise CheckpointError(f"fetching checkpoint step {step}: {exc}") from exc
    state = TrainState.from_bytes(blob, int(reply["params"]))
    return state, {str(k): int(v) for k, v in reply["torchft"].items()}
