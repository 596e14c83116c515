"""Round-based rendezvous through the store.

Keys of round ``r`` live under ``rdzv/<r>/``:

- ``count``: arrivals so far (``add``), so each arrival gets an index;
- ``host/<i>``: the name of arrival ``i``;
- ``members``: the closed round's membership, written once with compare-and-set, so every
  host reads the same one even when several close the round at the same moment.

The decisions (who is in, which rank) are pure functions; :func:`join` only acts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from elastic_sim.protocols.api import Runtime, Store, StoreTimeout
from elastic_sim.protocols.static.settings import StaticKnobs

POLL = 1.0
"""How often a host waiting for a round checks whether the job has ended meanwhile."""


class RendezvousTimeout(Exception):
    """A round did not reach min_hosts within the join timeout."""


class JobEnded(Exception):
    """The job finished while this host waited for a round."""


@dataclass(frozen=True)
class Membership:
    """A closed round: who is in and this host's rank."""

    round: int
    members: tuple[str, ...]
    rank: int

    @property
    def world_size(self) -> int:
        """Number of members."""
        return len(self.members)


def choose_members(arrivals: list[str], max_hosts: int) -> list[str]:
    """The first ``max_hosts`` distinct arrivals, in sorted order: the order gives the
    ranks. A host that arrived twice (its process died after joining the round and its
    new one joined it again) is one member."""
    return sorted(list(dict.fromkeys(arrivals))[:max_hosts])


def round_keys(store: Store, round_: int) -> Store:
    """The store view of one round."""
    return store.prefixed(f"rdzv/{round_}")


DONE_KEY = "job/done"


async def is_closed(store: Store, round_: int) -> bool:
    """Whether round ``round_`` already has its membership."""
    return await round_keys(store, round_).check(["members"])


async def someone_waiting(store: Store, round_: int) -> bool:
    """Whether any host has arrived for round ``round_`` (it waits to be admitted)."""
    return await round_keys(store, round_).check(["host/0"])


async def join(rt: Runtime, store: Store, round_: int, knobs: StaticKnobs,
               last: int | None = None) -> Membership | None:
    """Join round ``round_``; return the membership, or None if it closed without us.
    ``last``: the round this host was last a member of (a member of the world before this
    round is that world arriving; any other host waits for it, :func:`_await_the_world`).

    Raises :class:`RendezvousTimeout` if min_hosts are not reached within the join timeout
    and :class:`JobEnded` if the job completed while we waited."""
    keys = round_keys(store, round_)
    if await keys.check(["members"]):
        return None
    rt.record("rdzv_join", round=round_)
    index = await keys.add("count", 1) - 1
    await keys.set(f"host/{index}", rt.host.encode())
    await _wait_for_min(rt, store, keys, knobs, knobs.min_hosts)
    if knobs.max_hosts > knobs.min_hosts:
        try:
            await keys.wait([f"host/{knobs.max_hosts - 1}"], timeout=knobs.last_call)
        except StoreTimeout:
            pass  # last call over: close with whoever came
    arrivals = await _arrived(keys)
    # a host that arrived twice counts once: wait for as many more arrivals
    while len(set(arrivals)) < knobs.min_hosts:
        await _wait_for_min(rt, store, keys, knobs,
                            len(arrivals) + knobs.min_hosts - len(set(arrivals)))
        arrivals = await _arrived(keys)
    twice = len(arrivals) - len(set(arrivals))
    while twice and len(set(arrivals)) < knobs.max_hosts:
        try:
            await keys.wait([f"host/{knobs.max_hosts - 1 + twice}"], timeout=knobs.last_call)
        except StoreTimeout:
            break
        arrivals = await _arrived(keys)
        twice = len(arrivals) - len(set(arrivals))
    if round_ > 0 and last != round_ - 1 and not knobs.broken_close_without_the_world:
        arrivals = await _await_the_world(rt, store, keys, round_, knobs, arrivals)
    chosen = choose_members(arrivals, knobs.max_hosts)
    if knobs.broken_drop_last_arrival and round_ > 0 and len(arrivals) > knobs.min_hosts:
        chosen = sorted(h for h in chosen if h != arrivals[-1])
    proposal = json.dumps(chosen).encode()
    members = tuple(json.loads(await keys.compare_set("members", b"", proposal)))
    if rt.host not in members:
        rt.record("rdzv_rejected", round=round_)
        return None
    rank = members.index(rt.host)
    membership = Membership(round_, members, rank)
    if not late_record(knobs, membership):
        record_done(rt, membership)
    return membership


def late_record(knobs: StaticKnobs, m: Membership) -> bool:
    """Whether this member adopts its membership only after the round's sync (BROKEN on
    purpose: ``broken_late_round_record``)."""
    return knobs.broken_late_round_record and m.round > 0 and m.rank == m.world_size - 1


def record_done(rt: Runtime, m: Membership) -> None:
    """Record that this member completed round ``m.round``."""
    rt.record("rdzv_done", round=m.round, members=list(m.members), rank=m.rank,
              world_size=m.world_size)


async def _wait_for_min(rt: Runtime, store: Store, keys: Store, knobs: StaticKnobs,
                        need: int) -> None:
    """Wait until ``need`` arrivals (min_hosts, or more where a host arrived twice),
    polling for the end of the job meanwhile."""
    deadline = rt.monotonic() + knobs.join_timeout
    while True:
        left = deadline - rt.monotonic()
        if left <= 0:
            raise RendezvousTimeout(
                f"fewer than {knobs.min_hosts} hosts within {knobs.join_timeout}s"
            )
        try:
            await keys.wait([f"host/{need - 1}"], timeout=min(POLL, left))
            return
        except StoreTimeout:
            if await store.check([DONE_KEY]):
                raise JobEnded() from None
            # A host that died between taking its index and writing its name leaves a gap:
            # count the names that are there instead of waiting for that one index.
            if len(await _arrived(keys)) >= need:
                return


async def _await_the_world(rt: Runtime, store: Store, keys: Store, round_: int,
                           knobs: StaticKnobs, arrivals: list[str]) -> list[str]:
    """The arrivals to close round ``round_`` with, once a member of the world before it
    (round ``round_ - 1``'s) is among them: hosts that arrive while a world trains wait for
    its members, who admit them at their next commit; a round of the waiters alone would
    be a second world training beside the first (a split brain). A member's arrival gets
    the last call again, for the rest of its world. If none comes within the join timeout
    (the world is gone), the round closes with whoever came."""
    previous = round_keys(store, round_ - 1)
    if not await previous.check(["members"]):
        return arrivals
    world = set(json.loads(await previous.get("members")))
    if world & set(arrivals):
        return arrivals
    deadline = rt.monotonic() + knobs.join_timeout
    while not world & set(arrivals):
        left = deadline - rt.monotonic()
        if left <= 0:
            return arrivals  # the world is gone: the waiters go on without it
        try:
            await keys.wait([f"host/{len(arrivals)}"], timeout=min(POLL, left))
        except StoreTimeout:
            if await store.check([DONE_KEY]):
                raise JobEnded() from None
        arrivals = await _arrived(keys)
    if len(set(arrivals)) < knobs.max_hosts:
        try:
            await keys.wait([f"host/{knobs.max_hosts - 1}"], timeout=knobs.last_call)
        except StoreTimeout:
            pass  # last call over: close with whoever came
        arrivals = await _arrived(keys)
    return arrivals


async def _arrived(keys: Store) -> list[str]:
    """The names written so far, in arrival order; an index whose host died before writing
    its name is skipped (waiting for it would block until the store's timeout)."""
    count = int(await keys.add("count", 0))
    indices = [f"host/{i}" for i in range(count)]
    if not await keys.check(indices):  # rare: keep only the names that were written
        indices = [k for k in indices if await keys.check([k])]
    return [v.decode() for v in await keys.multi_get(indices)]


async def next_membership(
    rt: Runtime, store: Store, first_round: int, knobs: StaticKnobs, last: int | None = None
) -> Membership:
    """Join rounds from ``first_round`` on until one admits this host (``last``: the round
    it was last a member of)."""
    round_ = first_round
    while True:
        membership = await join(rt, store, round_, knobs, last)
        if membership is not None:
            return membership
        round_ += 1
