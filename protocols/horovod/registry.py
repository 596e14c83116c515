"""The worker-state registry: the reset barrier every worker of a round reaches by asking
for its new rank (READY) or by exiting (SUCCESS, FAILURE), and the decision its last
arriver takes (registration.py of horovod.runner.elastic).

The decision is a pure function of the recorded states (:func:`decide_trip`); the barrier
keeps upstream's ``threading.Barrier`` behaviour: the last arriver runs the action while
holding the barrier's condition, ``reset`` breaks the waiters, who re-wait.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol

from elastic_sim.protocols.api import Runtime, yield_point
from elastic_sim.protocols.sync import Condition, Event, Lock

RESET_LIMIT_EXCEEDED_MESSAGE = "Job has exceeded its reset limit of {} resets"
"""The error a job stops with when one more reset would pass ``reset_limit``."""


class WorkerState(str, Enum):
    """What a worker of the current round did."""

    READY = "READY"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"


SlotKey = tuple[str, int]
"""(host, local rank)."""


@dataclass(frozen=True)
class TripDecision:
    """What the barrier action does: stop or resume, after blacklisting some hosts."""

    action: Literal["stop", "resume"]
    reason: Literal["success", "all_failed", "all_blacklisted", "reset_limit", "reset"]
    blacklist: tuple[str, ...] = ()
    error_message: str | None = None


def decide_trip(
    states: Sequence[tuple[SlotKey, WorkerState]],
    size: int,
    blacklisted: frozenset[str],
    reset_count: int,
    reset_limit: int | None,
) -> TripDecision:
    """The decision table of one trip, evaluated in order: any success stops the job; all
    failed stops it; the hosts of the failures are blacklisted (the whole host) and if every
    recorded host is then blacklisted the job stops; a reset beyond the limit stops it with
    the limit's message; otherwise the job resets."""
    successes = sum(1 for _, s in states if s is WorkerState.SUCCESS)
    failed_hosts = [k[0] for k, s in states if s is WorkerState.FAILURE]
    if successes > 0:
        return TripDecision("stop", "success")
    if len(failed_hosts) == size:
        return TripDecision("stop", "all_failed")
    to_blacklist = tuple(dict.fromkeys(failed_hosts))
    now_blacklisted = blacklisted | set(to_blacklist)
    if all(k[0] in now_blacklisted for k, _ in states):
        return TripDecision("stop", "all_blacklisted", to_blacklist)
    if reset_limit is not None and reset_count >= reset_limit:
        return TripDecision("stop", "reset_limit", to_blacklist,
                            RESET_LIMIT_EXCEEDED_MESSAGE.format(reset_limit))
    return TripDecision("resume", "reset", to_blacklist)


class BrokenBarrier(Exception):
    """The barrier was reset (waiters re-wait) or its action failed (broken for good)."""


_FILLING, _DRAINING, _RESETTING, _BROKEN = 0, 1, -1, -2


class Barrier:
    """A cyclic barrier of ``parties`` with an async action run by the last arriver while it
    holds the barrier's condition (threading.Barrier semantics, without a timeout)."""

    def __init__(self, rt: Runtime, parties: int, action: Callable[[], Awaitable[None]]) -> None:
        self.parties = parties
        self._action = action
        self._cond = Condition(rt, Lock(rt, "barrier"))
        self._state = _FILLING
        self._count = 0

    @property
    def broken(self) -> bool:
        """Whether the action failed (every wait raises from now on)."""
        return self._state == _BROKEN

    @property
    def n_waiting(self) -> int:
        """Parties waiting now."""
        return self._count if self._state == _FILLING else 0

    async def wait(self) -> int:
        """Arrive; return the arrival index once all parties arrived (and the action ran)."""
        async with self._cond:
            while self._state in (_DRAINING, _RESETTING):
                await self._cond.wait()
            if self._state == _BROKEN:
                raise BrokenBarrier("barrier is broken")
            index = self._count
            self._count += 1
            try:
                if self._count == self.parties:
                    try:
                        await self._action()
                    except BaseException:
                        self._break()
                        raise
                    self._state = _DRAINING
                    self._cond.notify_all()
                else:
                    while self._state == _FILLING:
                        await self._cond.wait()
                    if self._state != _DRAINING:
                        raise BrokenBarrier("barrier was reset")
                return index
            finally:
                self._count -= 1
                if self._count == 0 and self._state in (_DRAINING, _RESETTING):
                    self._state = _FILLING
                    self._cond.notify_all()

    async def reset(self) -> None:
        """Break the current waiters (they raise :class:`BrokenBarrier`); start afresh."""
        async with self._cond:
            if self._count > 0:
                # as threading.Barrier: a draining barrier keeps draining (its released
                # parties still pass); a filling or broken one makes its waiters raise
                if self._state in (_FILLING, _BROKEN):
                    self._state = _RESETTING
            else:
                self._state = _FILLING
            self._cond.notify_all()

    def _break(self) -> None:
        self._state = _BROKEN
        self._cond.notify_all()


class RegistryHost(Protocol):
    """What the registry needs from the driver."""

    def finished(self) -> bool:
        """Whether the driver has stopped."""

    def is_blacklisted(self, host: str) -> bool:
        """The host's raw blacklist flag."""

    def blacklist(self, host: str) -> None:
        """Blacklist a host (and kill its processes)."""

    async def stop(self, error_message: str | None = None) -> None:
        """Stop the job."""

    async def resume(self) -> None:
        """Wait for min_np slots, reassign, spawn (raises when it cannot)."""


class WorkerStateRegistry:
    """Records READY/SUCCESS/FAILURE per slot of the current round; the barrier's action
    applies :func:`decide_trip`."""

    def __init__(self, rt: Runtime, driver: RegistryHost, reset_limit: int | None) -> None:
        self._rt = rt
        self._driver = driver
        self.reset_limit = reset_limit
        self.reset_count = 0
        self.rendezvous_id = 0
        self.size = 0
        self._lock = Lock(rt, "registry")
        self._action_event = Event(rt)
        self._action_event.set()
        self._states: dict[SlotKey, WorkerState] = {}
        self._order: list[SlotKey] = []
        self.barrier = Barrier(rt, 1, self._action)
        self.decisions: list[TripDecision] = []

    async def reset(self, size: int) -> None:
        """A new round of ``size`` parties."""
        async with self._lock:
            self._states.clear()
            self._order.clear()
            self.barrier = Barrier(self._rt, size, self._action)
            self.rendezvous_id += 1
            self.size = size

    def recorded(self) -> list[tuple[SlotKey, WorkerState]]:
        """The states of this round in the order first recorded."""
        return [(k, self._states[k]) for k in self._order]

    async def record(self, host: str, slot: int, state: WorkerState) -> int:
        """Record a state and wait for the trip; the rendezvous id it belongs to."""
        if self._driver.finished() or self._driver.is_blacklisted(host):
            return self.rendezvous_id
        await self._action_event.wait()
        # the event is not checked again once the lock is taken: a barrier action that
        # starts in between holds the barrier's condition and then wants this lock, while a
        # FAILURE here holds this lock and wants the condition (barrier.reset): a deadlock
        await yield_point(self._rt, "horovod/runner/elastic/registration.py _record_state: "
                          "self._action_event.wait() -> with self._lock")
        key = (host, slot)
        async with self._lock:
            if key in self._states and state is WorkerState.FAILURE:
                await self.barrier.reset()
            if key not in self._states or state is WorkerState.FAILURE:
                if key not in self._states:
                    self._order.append(key)
                self._states[key] = state
            rid = self.rendezvous_id
            # every call waits on the barrier once: a slot recorded twice counts twice
            self._rt.record("hvd_record", rendezvous=rid, slot=f"{host}:{slot}",
                            state=state.value, parties=self.size)
        return await self._wait(key, state, rid)

    async def _wait(self, key: SlotKey, state: WorkerState, rid: int) -> int:
        while True:
            try:
                await self.barrier.wait()
                return rid
            except BrokenBarrier:
                if self.barrier.broken:
                    raise
                async with self._lock:
                    rid = self.rendezvous_id
                    now = self._states.get(key, state)
                    if now is not state:
                        raise RuntimeError(
                            f"State {state.value} overridden by {now.value}") from None

    async def _action(self) -> None:
        self._action_event.clear()
        await self._on_workers_recorded()
        self._action_event.set()

    async def _on_workers_recorded(self) -> None:
        blacklisted = frozenset(h for (h, _), _ in self.recorded()
                                if self._driver.is_blacklisted(h))
        decision = decide_trip(self.recorded(), self.size, blacklisted, self.reset_count,
                               self.reset_limit)
        self.decisions.append(decision)
        self._rt.record("hvd_trip", rendezvous=self.rendezvous_id, decision=decision.reason,
                        blacklist=list(decision.blacklist),
                        states={f"{h}:{s}": st.value for (h, s), st in self.recorded()})
        for host in decision.blacklist:
            self._driver.blacklist(host)
        if decision.action == "stop":
            await self._driver.stop(decision.error_message)
            return
        try:
            self.reset_count += 1
            await self._driver.resume()
        except Exception as exc:
            self._rt.record("hvd_resume_failed", error=f"{type(exc).__name__}: {exc}")
            await self._driver.stop()
