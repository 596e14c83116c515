"""The stored form of the rendezvous state: the fast encoder writes exactly the canonical
JSON of ``to_json``, decoding gives the state back, and the sweep's shortcut removes
exactly the nodes the plain rule removes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_sim.protocols.torchelastic.memo import WriteMemo
from elastic_sim.protocols.torchelastic.state import (
    NodeDesc,
    NodeMap,
    RendezvousSettings,
    RendezvousState,
    expired_nodes,
    setting_us,
    sweep,
)

NODES = st.builds(
    NodeDesc,
    st.sampled_from(["node1", "node10", "node2", 'quo"te', "back\\slash", "nöde", ""]),
    st.integers(0, 2**31),
    st.integers(0, 3),
)
TIMES = st.integers(-(10**6), 10**16)


@st.composite
def states(draw: st.DrawFn) -> RendezvousState:
    return RendezvousState(
        round=draw(st.integers(0, 10**6)),
        complete=draw(st.booleans()),
        deadline=draw(st.one_of(st.none(), TIMES)),
        closed=draw(st.booleans()),
        participants=NodeMap(draw(st.dictionaries(NODES, st.integers(0, 10**4), max_size=12))),
        wait_list=draw(st.sets(NODES, max_size=6)),
        redundancy_list=draw(st.sets(NODES, max_size=6)),
        last_heartbeats=NodeMap(draw(st.dictionaries(NODES, TIMES, max_size=16))),
    )


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(states())
def test_encode_writes_the_canonical_json_and_decodes_back(state: RendezvousState) -> None:
    data = state.encode()
    assert data == json.dumps(state.to_json(), separators=(",", ":")).encode()
    assert RendezvousState.decode(data) == state


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(states(), TIMES, st.integers(1, 10**7), st.integers(1, 4), st.integers(1, 3))
def test_sweep_removes_exactly_the_expired_nodes(state: RendezvousState, now: int,
                                                 interval_us: int, attempts: int,
                                                 min_nodes: int) -> None:
    s = RendezvousSettings(min_nodes=min_nodes, max_nodes=min_nodes + 2,
                           keep_alive_interval=interval_us / 1e6,
                           keep_alive_max_attempt=attempts)
    expire = now - s.keep_alive_interval_us * attempts
    expected_dead = sorted(n for n, hb in state.last_heartbeats.items() if hb < expire)
    swept = state.copy()
    dead = expired_nodes(swept, s, now)  # what StateHolder.sync does after every sync
    sweep(swept, dead, s)
    assert sorted(dead) == expected_dead
    assert set(swept.last_heartbeats) == set(state.last_heartbeats) - set(dead)
    assert set(swept.participants) == set(state.participants) - set(dead)
    assert swept.wait_list == state.wait_list - set(dead)
    assert swept.redundancy_list == state.redundancy_list - set(dead)


EDITS = st.lists(
    st.tuples(st.sampled_from(["set_part", "del_part", "set_beat", "del_beat", "pop", "wait"]),
              NODES, st.integers(0, 10**4)),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(states(), st.lists(EDITS, min_size=1, max_size=5))
def test_a_state_copied_edited_and_reencoded_still_writes_the_canonical_json(
    start: RendezvousState, rounds: list[list[tuple[str, NodeDesc, int]]]
) -> None:
    """What a node does: decode (a copy that remembers the encoded form), edit a few nodes,
    encode again and write. The incremental encoder must write what the full one writes, and
    the written bytes must decode (by identity, unparsed) to the state that was encoded."""
    data = start.encode()
    for edits in rounds:
        state = RendezvousState.decode(data)
        for what, node, value in edits:
            if what == "set_part":
                state.participants[node] = value
            elif what == "del_part" and node in state.participants:
                del state.participants[node]
            elif what == "set_beat":
                state.last_heartbeats[node] = value
            elif what == "del_beat" and node in state.last_heartbeats:
                del state.last_heartbeats[node]
            elif what == "pop":
                state.participants.pop(node, None)
            elif what == "wait":
                state.wait_list.add(node)
        data = state.encode()
        assert data == json.dumps(state.to_json(), separators=(",", ":")).encode()
        written: WriteMemo[RendezvousState] = WriteMemo(64)
        written.hold(data, state)
        assert RendezvousState.decode_shared(data, written) is state  # by identity
        written.settle(data, won=True)
        assert RendezvousState.decode(data) == state
        assert RendezvousState.decode(bytes(bytearray(data))) == state  # parsed
        assert RendezvousState.decode(data).participants.members() == tuple(
            sorted(state.participants))


@pytest.mark.parametrize(("seconds", "us"), [(2.5000005, 2_500_001), (1.0000015, 1_000_001),
                                             (5.0000025, 5_000_002), (0.1, 100_000)])
def test_a_setting_s_microseconds_are_torch_s_timedelta_s(seconds: float, us: int) -> None:
    from datetime import timedelta

    assert setting_us(seconds) == us == timedelta(seconds=seconds) // timedelta(microseconds=1)
    assert RendezvousSettings(keep_alive_interval=seconds).keep_alive_interval_us == us
