"""Nodes read the rendezvous state without copying it and copy it before they change it
(the simulator's memory at scale depends on it): one node's edit never shows in another
node's state nor in what the store holds, and the bytes a node wrote read back, by
identity, as the state it wrote, however many writes are in flight."""

from __future__ import annotations

from elastic_sim.protocols.torchelastic.backend import C10dBackend
from elastic_sim.protocols.torchelastic.executor import Executor, StateHolder, WrittenMemos
from elastic_sim.protocols.torchelastic.memo import WriteMemo
from elastic_sim.protocols.torchelastic.ops import Action, join_op, keep_alive_op
from elastic_sim.protocols.torchelastic.state import NodeDesc, RendezvousSettings, RendezvousState
from tests.protocols.torchelastic.memstore import MemStore, run_now

SETTINGS = RendezvousSettings(run_id="t", min_nodes=2, max_nodes=3, last_call_timeout=30)


class _Clock:
    def __init__(self) -> None:
        self.mono = 0.0
        self.us = 10**15

    def monotonic(self) -> float:
        return self.mono

    def now_us(self) -> int:
        return self.us


async def _no_delay(seconds: float) -> None:
    return None


def _nodes(*names: str) -> tuple[MemStore, list[Executor]]:
    """Nodes of one rendezvous that hand each other the objects they write, as a sim
    run's do: they share one store and its memos (``Runtime.shared``)."""
    store, memos = MemStore(), WrittenMemos()
    out = []
    for name in names:
        backend = C10dBackend(store, SETTINGS.run_id, memos.values)
        run_now(backend.init())
        clock = _Clock()
        holder = StateHolder(backend, SETTINGS, clock, cache_duration=0, written=memos.states)
        out.append(Executor(NodeDesc(name, 1), holder, SETTINGS, clock, _no_delay))
    return store, out


def _join(ex: Executor) -> None:
    """Decide to join, apply it locally, publish it (a lone node's join never finishes)."""
    action, _ = run_now(ex.step(join_op, 10**9))
    assert action is Action.ADD_TO_PARTICIPANTS
    assert run_now(ex.holder.sync()) is True


def _stored(store: MemStore) -> RendezvousState:
    import base64

    return RendezvousState.decode(base64.b64decode(store.data["torch.rendezvous.t"]))


def test_a_node_changing_its_state_leaves_the_others_and_the_store_alone() -> None:
    store, (a, b) = _nodes("a", "b")
    _join(a)  # the store holds {a}
    run_now(b.holder.sync())
    run_now(a.holder.sync())
    assert a.holder.state is b.holder.state  # both read the one stored state, uncopied
    before = b.holder.state.copy()

    b.clock.us += 1  # type: ignore[attr-defined]
    action, _ = run_now(b.step(join_op, 10**9))  # b decides and applies locally
    assert action is Action.ADD_TO_PARTICIPANTS
    assert set(b.holder.state.participants) == {NodeDesc("a", 1), NodeDesc("b", 1)}
    assert a.holder.state == before  # a's state did not change under it
    assert _stored(store) == before  # nor did the stored one (b has not published yet)

    run_now(b.holder.sync())  # b publishes; a reads it
    run_now(a.holder.sync())
    assert set(a.holder.state.participants) == {NodeDesc("a", 1), NodeDesc("b", 1)}


def test_a_keep_alive_of_a_node_reading_the_shared_state_is_its_own() -> None:
    _, (a, b) = _nodes("a", "b")
    _join(a)
    run_now(b.holder.sync())
    _join(b)
    run_now(a.holder.sync())
    shared = a.holder.state
    beat = shared.last_heartbeats[NodeDesc("a", 1)]
    a.clock.us += 10**7  # type: ignore[attr-defined]  # 10 s later: a keep-alive is due
    action, _ = run_now(a.step(keep_alive_op, 10**9))
    assert action is Action.KEEP_ALIVE
    assert a.holder.state is not shared
    assert shared.last_heartbeats[NodeDesc("a", 1)] == beat
    assert a.holder.state.last_heartbeats[NodeDesc("a", 1)] == beat + 10**7


def test_a_sweep_copies_before_it_removes_an_expired_node() -> None:
    store, (a, b) = _nodes("a", "b")
    _join(a)
    run_now(b.holder.sync())
    shared = b.holder.state
    b.clock.us += 10**9  # type: ignore[attr-defined]  # a's heartbeat is long expired for b
    run_now(b.holder.sync())  # reads the same stored bytes again, then sweeps a out
    assert b.holder.dead_nodes == [NodeDesc("a", 1)]
    assert NodeDesc("a", 1) not in b.holder.state.participants
    assert NodeDesc("a", 1) in shared.participants  # what others share is untouched
    assert NodeDesc("a", 1) in _stored(store).participants


def test_every_write_in_flight_is_remembered_not_only_the_latest_few() -> None:
    memo: WriteMemo[str] = WriteMemo(keep=2)
    writes = [f"state {i}".encode() for i in range(10)]
    for i, data in enumerate(writes):
        memo.hold(data, f"meaning {i}")
    # More writes in flight than the memo keeps winners: the one that wins is still found.
    assert [memo.get(d) for d in writes] == [f"meaning {i}" for i in range(10)]
    memo.settle(writes[7], won=True)
    for d in writes[:7] + writes[8:]:
        memo.settle(d, won=False)
    assert memo.get(writes[7]) == "meaning 7"
    assert [memo.get(d) for d in writes[:7]] == [None] * 7  # losers are forgotten
    assert memo.get(bytes(bytearray(writes[7]))) is None  # equal bytes, another object


def test_only_the_latest_winners_are_kept() -> None:
    memo: WriteMemo[int] = WriteMemo(keep=2)
    writes = [bytes([i]) * 8 for i in range(3)]
    for i, data in enumerate(writes):
        memo.hold(data, i)
        memo.settle(data, won=True)
    assert [memo.get(d) for d in writes] == [None, 1, 2]
