"""The rendezvous operations as pure decision functions.

Each op looks at (state, node, settings) and two clock readings, the node's monotonic
clock (op deadlines) and its wall clock (heartbeats, last call), and returns the next
:class:`Action`. Nothing here touches a store or a clock: the executor does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
    remove_participant_epilogue,
)

ROLLBACK_PERIOD = 5.0
"""After the join deadline a node may still remove itself for this long (seconds)."""


class Action(enum.Enum):
    """What an op asks the executor to do next (upstream's numbering)."""

    KEEP_ALIVE = 1
    ADD_TO_PARTICIPANTS = 2
    ADD_TO_WAIT_LIST = 3
    ADD_TO_REDUNDANCY_LIST = 4
    REMOVE_FROM_PARTICIPANTS = 5
    REMOVE_FROM_WAIT_LIST = 6
    REMOVE_FROM_REDUNDANCY_LIST = 7
    MARK_RENDEZVOUS_COMPLETE = 8
    MARK_RENDEZVOUS_CLOSED = 9
    SYNC = 10
    ERROR_CLOSED = 11
    ERROR_TIMEOUT = 12
    FINISH = 13


class RendezvousError(Exception):
    """Base of rendezvous errors."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous is closed (the job is over)."""


class RendezvousTimeoutError(RendezvousError):
    """An op did not finish before its deadline."""


class RendezvousConnectionError(RendezvousError):
    """The store backing the rendezvous failed."""


class RendezvousStateError(RendezvousError):
    """The stored state could not be decoded."""


class RendezvousGracefulExitError(RendezvousError):
    """A spare (redundancy list) node found the rendezvous closed: exit quietly."""


@dataclass(frozen=True)
class Context:
    """Everything an op decides on."""

    node: NodeDesc
    state: RendezvousState
    settings: RendezvousSettings
    monotonic: float
    """The node's monotonic clock now (seconds)."""
    now_us: int
    """The node's wall clock now (microseconds)."""


Op = Callable[[Context, float], Action]
"""An op: (context, monotonic deadline) -> action."""


def should_keep_alive(ctx: Context) -> bool:
    """A heartbeat is due when my last one is at least one interval old; never when my
    entry is absent (e.g. someone swept me)."""
    last = ctx.state.last_heartbeats.get(ctx.node)
    if last is None:
        return False
    return last <= ctx.now_us - ctx.settings.keep_alive_interval_us


def exit_op(ctx: Context, deadline: float) -> Action:
    """Leave the current round (does not look at ``closed``)."""
    if ctx.node in ctx.state.participants:
        if ctx.monotonic > deadline:
            return Action.ERROR_TIMEOUT
        return Action.REMOVE_FROM_PARTICIPANTS
    return Action.FINISH


def close_op(ctx: Context, deadline: float) -> Action:
    """Close the rendezvous for good."""
    if ctx.state.closed:
        return Action.FINISH
    if ctx.monotonic > deadline:
        return Action.ERROR_TIMEOUT
    return Action.MARK_RENDEZVOUS_CLOSED


def keep_alive_op(ctx: Context, deadline: float) -> Action:
    """Write a heartbeat if one is due (never polls)."""
    if should_keep_alive(ctx):
        if ctx.monotonic > deadline:
            return Action.ERROR_TIMEOUT
        return Action.KEEP_ALIVE
    return Action.FINISH


def join_op(ctx: Context, deadline: float) -> Action:
    """Join the next round, or wait in the wait or redundancy list."""
    state, node, settings = ctx.state, ctx.node, ctx.settings
    if state.closed:
        if node in state.redundancy_list:
            raise RendezvousGracefulExitError(
                f"The rendezvous '{settings.run_id}' is closed, terminating pending rendezvous."
            )
        return Action.ERROR_CLOSED
    if node in state.redundancy_list:  # no timeout check in this branch (as upstream)
        if len(state.participants) == settings.max_nodes:
            return Action.KEEP_ALIVE if should_keep_alive(ctx) else Action.SYNC
        return Action.REMOVE_FROM_REDUNDANCY_LIST
    is_participant = node in state.participants
    if state.complete and is_participant:
        return Action.FINISH
    now = ctx.monotonic
    if now > deadline:
        if now <= deadline + ROLLBACK_PERIOD:
            if is_participant:
                return Action.REMOVE_FROM_PARTICIPANTS
            if node in state.wait_list:
                return Action.REMOVE_FROM_WAIT_LIST
        return Action.ERROR_TIMEOUT
    if state.complete:
        if len(state.participants) < settings.max_nodes:
            if node not in state.wait_list:
                return Action.ADD_TO_WAIT_LIST
        elif node not in state.redundancy_list and node not in state.wait_list:
            return Action.ADD_TO_REDUNDANCY_LIST
        # a node already on the wait list stays there even at max_nodes participants
    elif is_participant:
        if (
            settings.min_nodes <= len(state.participants) <= settings.max_nodes
            and state.deadline is not None
            and state.deadline < ctx.now_us
        ):
            return Action.MARK_RENDEZVOUS_COMPLETE  # only a participant completes a round
    else:
        return Action.ADD_TO_PARTICIPANTS
    return Action.KEEP_ALIVE if should_keep_alive(ctx) else Action.SYNC


def apply(action: Action, state: RendezvousState, node: NodeDesc,
          settings: RendezvousSettings, now_us: int) -> None:
    """Apply a mutating action to ``state`` in place (the executor publishes it later)."""
    if action is Action.KEEP_ALIVE:
        state.last_heartbeats[node] = now_us
    elif action is Action.ADD_TO_PARTICIPANTS:
        state.wait_list.discard(node)
        state.participants[node] = 0
        if len(state.participants) == settings.min_nodes:
            state.deadline = now_us + settings.last_call_us
        state.last_heartbeats[node] = now_us
        if len(state.participants) == settings.max_nodes:
            _mark_complete(state)
    elif action is Action.ADD_TO_WAIT_LIST:
        state.redundancy_list.discard(node)
        state.wait_list.add(node)
        state.last_heartbeats[node] = now_us
    elif action is Action.ADD_TO_REDUNDANCY_LIST:
        state.redundancy_list.add(node)
        state.last_heartbeats[node] = now_us
    elif action is Action.REMOVE_FROM_PARTICIPANTS:
        del state.participants[node]
        del state.last_heartbeats[node]
        remove_participant_epilogue(state, settings)
    elif action is Action.REMOVE_FROM_WAIT_LIST:
        state.wait_list.remove(node)
        del state.last_heartbeats[node]
    elif action is Action.REMOVE_FROM_REDUNDANCY_LIST:
        state.redundancy_list.remove(node)
        del state.last_heartbeats[node]
    elif action is Action.MARK_RENDEZVOUS_COMPLETE:
        _mark_complete(state)
    elif action is Action.MARK_RENDEZVOUS_CLOSED:
        state.closed = True
    else:
        raise ValueError(f"{action} does not mutate the state")


def _mark_complete(state: RendezvousState) -> None:
    state.complete = True
    state.deadline = None
    for rank, n in enumerate(sorted(state.participants)):
        state.participants[n] = rank


MUTATIONS = frozenset(a for a in Action if 1 <= a.value <= 9)
"""The actions :func:`apply` performs."""
