"""The worker's elastic State (horovod/common/elastic.py, torch/elastic/state.py): save,
restore, sync, commit = save + check_host_updates, and the queue of host-update
notifications that rank 0's notification service fills."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from elastic_sim.protocols.api import Runtime, TracedGroup
from elastic_sim.protocols.broadcast import Algorithm, broadcast_bytes, broadcast_object
from elastic_sim.protocols.horovod.hosts import HostUpdateResult
from elastic_sim.protocols.static.training import TrainState
from elastic_sim.protocols.sync import Queue

MODEL = "model"
"""The name of the model's (and optimizer's) broadcast in a sync: upstream broadcasts each
parameter under its own name; the model sends them as one blob."""


def newer_updates(
    last: int, messages: Iterable[tuple[int, int]]
) -> tuple[int, HostUpdateResult]:
    """Fold queued ``(timestamp, update)`` notifications in arrival order: a message counts
    only when its timestamp is strictly newer than the newest seen so far (integer seconds,
    so a second change within the same second is dropped). Returns the newest timestamp and
    the union of the counted updates."""
    update = HostUpdateResult.no_update
    for ts, upd in messages:
        if ts > last:
            last = ts
            update |= HostUpdateResult(upd)
    return last, update


class HorovodInternalError(Exception):
    """A collective failed (peer died or timed out): restore and reset."""


class HostsUpdatedInterrupt(Exception):
    """Rank 0 was told the hosts changed: reset, syncing unless only removals happened."""

    def __init__(self, skip_sync: bool) -> None:
        super().__init__(f"hosts updated (skip_sync={skip_sync})")
        self.skip_sync = skip_sync


@dataclass(frozen=True)
class Progress:
    """The plain attributes of the test script's TorchState."""

    epoch: int = 0
    batch: int = 0
    commits: int = 0
    rendezvous: int = 0


class State:
    """Training progress and model with a saved copy, plus the host-update queue."""

    def __init__(self, rt: Runtime, model: TrainState, state_bytes: int,
                 state_broadcast: Algorithm = "group") -> None:
        self._rt = rt
        self.progress = Progress()
        self.model = model
        self.state_bytes = state_bytes
        self.state_broadcast = state_broadcast
        self._saved: tuple[Progress, TrainState] = (self.progress, self.model)
        self.host_messages: Queue[tuple[int, int]] = Queue(rt)
        self.last_updated_timestamp = 0
        self._reset_callbacks: list[Callable[[], None]] = []

    @property
    def saved_step(self) -> int:
        """The model step of the last save."""
        return self._saved[1].step

    def save(self) -> None:
        """Snapshot progress and model."""
        self._saved = (self.progress, self.model)

    def restore(self) -> None:
        """Go back to the snapshot."""
        self.progress, self.model = self._saved

    async def sync(self, group: TracedGroup) -> None:
        """Rank 0's model (as bytes), then its saved plain attributes, to everyone; every
        rank then holds rank 0's state, but has saved only its plain attributes."""
        blob = self.model.to_bytes(self.state_bytes) if group.rank == 0 else None
        data = await broadcast_bytes(group, blob, 0, self.state_broadcast, name=MODEL)
        nparams = len(self.model.params)
        model = TrainState.from_bytes(data, nparams)
        saved = await broadcast_object(group, asdict(self._saved[0]), 0, name="dict")
        self.model = model
        self.progress = Progress(**saved)
        # ObjectState.sync keeps the broadcast attributes as its saved copy, but the model
        # handler's sync does not save: the model's snapshot stays this rank's own last
        # commit (a fresh process's initial model) until the next commit.
        self._saved = (self.progress, self._saved[1])

    def on_host_updated(self, timestamp: int, update: int) -> None:
        """The notification service's listener: queue the message."""
        self.host_messages.put_nowait((timestamp, update))

    def register_reset_callbacks(self, callbacks: Iterable[Callable[[], None]]) -> None:
        """Add callbacks that :meth:`on_reset` calls, in order."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        """After a reset (the new world formed, before the next sync): queued
        notifications are discarded (the timestamp is kept), then the reset callbacks run,
        on this rank's own state: what the coming sync brings is not there yet."""
        self.host_messages = Queue(self._rt)
        for callback in self._reset_callbacks:
            callback()

    async def commit(self, group: TracedGroup) -> None:
        """Save, then the collective check for host updates."""
        self.save()
        await self.check_host_updates(group)

    async def check_host_updates(self, group: TracedGroup) -> None:
        """Drain the queue (only strictly newer timestamps count), adopt rank 0's view, and
        raise :class:`HostsUpdatedInterrupt` on every rank when it saw an update."""
        prev = self.last_updated_timestamp
        queued = []
        while self.host_messages.qsize():
            queued.append(self.host_messages.get_nowait())
        last, update = newer_updates(prev, queued)
        view: Any = await broadcast_object(group, [prev, last, int(update)], 0, name="tuple")
        prev, self.last_updated_timestamp, upd_all = int(view[0]), int(view[1]), int(view[2])
        if self.last_updated_timestamp > prev:
            raise HostsUpdatedInterrupt(upd_all == HostUpdateResult.removed)

    def advance(self, **changes: int) -> None:
        """Change plain attributes (epoch, batch, commits, rendezvous)."""
        self.progress = replace(self.progress, **changes)
