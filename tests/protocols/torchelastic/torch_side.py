"""Drive torch 2.13's own rendezvous classes on a virtual clock, for differential tests.

torch reads ``time.monotonic()`` and ``datetime.now(timezone.utc)`` inside its ops, its
state holder and its executor's action methods; :func:`clock` swaps both module globals
of ``dynamic_rendezvous`` for virtual readings while one step runs.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from elastic_sim.protocols.torchelastic.ops import Action
from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    NodeMap,
    RendezvousSettings,
    RendezvousState,
)

TORCH_VERSION = "2.13.0"
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
US = timedelta(microseconds=1)

dr: Any = None
"""torch.distributed.elastic.rendezvous.dynamic_rendezvous, once imported."""


def load() -> Any:
    """Import torch's module (callers skip when torch is absent or another version)."""
    global dr
    import torch
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    if not torch.__version__.startswith(TORCH_VERSION):
        raise ImportError(f"differential tests pin torch {TORCH_VERSION}, found "
                          f"{torch.__version__}")
    dr = dynamic_rendezvous
    # torch's mutators and state holder log an event through _record(), which walks the
    # call stack (inspect.stack) every time: 70% of the test's time. Events never feed back
    # into the state, so silencing them changes no decision.
    for cls in (dr._DistributedRendezvousOpExecutor, dr._BackendRendezvousStateHolder):
        cls._record = lambda self, *a, **k: None
    return dr


@contextlib.contextmanager
def clock(monotonic: float, now_us: int) -> Iterator[None]:
    """Make torch's module see these clock readings."""
    now = EPOCH + timedelta(microseconds=now_us)

    class _FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return now

    saved = dr.time, dr.datetime
    dr.time = types.SimpleNamespace(monotonic=lambda: monotonic)
    dr.datetime = _FrozenDatetime
    try:
        yield
    finally:
        dr.time, dr.datetime = saved


def node(n: NodeDesc) -> Any:
    """Our node -> torch's _NodeDesc."""
    return dr._NodeDesc(n.addr, n.pid, n.local_id)


def settings(s: RendezvousSettings) -> Any:
    """Our settings -> torch's RendezvousSettings."""
    return dr.RendezvousSettings(
        s.run_id, s.min_nodes, s.max_nodes,
        dr.RendezvousTimeout(
            join=timedelta(seconds=s.join_timeout),
            last_call=timedelta(seconds=s.last_call_timeout),
            close=timedelta(seconds=s.close_timeout),
            heartbeat=timedelta(seconds=s.heartbeat_timeout),
        ),
        timedelta(seconds=s.keep_alive_interval),
        s.keep_alive_max_attempt,
    )


def _t(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def _us(t: datetime) -> int:
    return (t - EPOCH) // US


def state_to_torch(s: RendezvousState) -> Any:
    """Our state -> torch's _RendezvousState."""
    ts = dr._RendezvousState()
    ts.round, ts.complete, ts.closed = s.round, s.complete, s.closed
    ts.deadline = None if s.deadline is None else _t(s.deadline)
    ts.participants = {node(n): r for n, r in s.participants.items()}
    ts.wait_list = {node(n) for n in s.wait_list}
    ts.redundancy_list = {node(n) for n in s.redundancy_list}
    ts.last_heartbeats = {node(n): _t(t) for n, t in s.last_heartbeats.items()}
    return ts


def state_from_torch(ts: Any) -> RendezvousState:
    """torch's _RendezvousState -> ours."""

    def n(x: Any) -> NodeDesc:
        return NodeDesc(x.addr, x.pid, x.local_id)

    return RendezvousState(
        round=ts.round, complete=ts.complete,
        deadline=None if ts.deadline is None else _us(ts.deadline), closed=ts.closed,
        participants=NodeMap({n(k): v for k, v in ts.participants.items()}),
        wait_list={n(k) for k in ts.wait_list},
        redundancy_list={n(k) for k in ts.redundancy_list},
        last_heartbeats=NodeMap({n(k): _us(v) for k, v in ts.last_heartbeats.items()}),
    )


OPS = {
    "join": lambda: dr._RendezvousJoinOp(),
    "exit": lambda: dr._RendezvousExitOp(),
    "close": lambda: dr._RendezvousCloseOp(),
    "keep_alive": lambda: dr._RendezvousKeepAliveOp(),
}


def decide(op: str, s: RendezvousState, n: NodeDesc, st: RendezvousSettings,
           monotonic: float, now_us: int, deadline: float) -> Action | type[BaseException]:
    """torch's decision (an action, or the class of the error the op raised)."""
    ctx = dr._RendezvousContext(node(n), state_to_torch(s), settings(st))
    with clock(monotonic, now_us):
        try:
            return Action(OPS[op]()(ctx, deadline).value)
        except dr.RendezvousError as exc:
            return type(exc)


class TorchNode:
    """One node's torch state holder and executor over a shared c10d HashStore backend."""

    def __init__(self, n: NodeDesc, backend: Any, st: RendezvousSettings) -> None:
        self.node = n
        self.settings = st
        self.holder = dr._BackendRendezvousStateHolder(backend, settings(st), cache_duration=1)
        self.executor = dr._DistributedRendezvousOpExecutor(node(n), self.holder, settings(st))

    def step(self, op: str, deadline: float, monotonic: float, now_us: int,
             update_deadline: Callable[[float], float] | None) -> tuple[Action, float]:
        """One iteration of torch's executor loop, built from torch's own holder, op and
        action methods: sync; decide; raise on errors; apply the mutation; mark dirty."""
        ex = self.executor
        with clock(monotonic, now_us):
            self.holder.sync()
            ex._state = self.holder.state
            ctx = dr._RendezvousContext(ex._node, ex._state, ex._settings)
            action = Action(OPS[op]()(ctx, deadline).value)
            if action is Action.ERROR_CLOSED:
                raise dr.RendezvousClosedError
            if action is Action.ERROR_TIMEOUT:
                raise dr.RendezvousTimeoutError
            if action in (Action.FINISH, Action.SYNC):
                return action, deadline
            getattr(ex, "_" + action.name.lower())()
            if action is Action.REMOVE_FROM_REDUNDANCY_LIST and update_deadline is not None:
                deadline = update_deadline(self.settings.join_timeout)
            self.holder.mark_dirty()
            return action, deadline
