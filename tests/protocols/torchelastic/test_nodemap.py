"""NodeMap behaves as a dict whose iteration is in node order, and copies that share
chunks never see one another's changes (the rendezvous state's versions depend on it)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_sim.protocols.torchelastic import nodemap
from elastic_sim.protocols.torchelastic.nodemap import NodeDesc, NodeMap

NODES = st.builds(NodeDesc, st.sampled_from(["a", "b", "c", "node1", "node10", "node2"]),
                  st.integers(0, 40), st.integers(0, 2))
EDIT = st.tuples(st.sampled_from(["set", "del", "pop", "copy", "clear", "update"]),
                 st.integers(0, 3), NODES, st.integers(-5, 5))


def _entry(key: tuple[NodeDesc, int]) -> str:
    return json.dumps([*key[0], key[1]], separators=(",", ":"))


class _Entries(dict[tuple[NodeDesc, int], str]):
    def __missing__(self, key: tuple[NodeDesc, int]) -> str:
        return _entry(key)


def _check(m: NodeMap, model: dict[NodeDesc, int]) -> None:
    assert len(m) == len(model)
    assert list(m) == sorted(model)
    assert m.items() == sorted(model.items())
    assert m.values() == [v for _, v in sorted(model.items())]
    assert m == model and m == NodeMap(model)
    assert m.members() == tuple(sorted(model))
    assert m.joined(_Entries()) == ",".join(map(_entry, sorted(model.items())))
    if model:
        assert m.least() == min(model.values())
    for k, v in model.items():
        assert k in m and m[k] == v and m.get(k) == v


@pytest.mark.parametrize("chunk", [1, 2, 3, 64])
@settings(max_examples=150, deadline=None)
@given(start=st.dictionaries(NODES, st.integers(-5, 5), max_size=20),
       edits=st.lists(EDIT, max_size=40))
def test_copies_behave_as_independent_dicts(chunk: int, start: dict[NodeDesc, int],
                                            edits: list[tuple[str, int, NodeDesc, int]]) -> None:
    """Four maps (copies of copies) edited in any order against four plain dicts; small
    chunks exercise splits and empty chunks. The derived values (members, least, encoded
    form) are asked for between edits, so a stale cache on a shared chunk would show."""
    old = nodemap.CHUNK
    nodemap.CHUNK = chunk
    try:
        maps = [NodeMap(start)]
        models = [dict(start)]
        for what, which, node, value in edits:
            i = which % len(maps)
            m, model = maps[i], models[i]
            if what == "set":
                m[node] = value
                model[node] = value
            elif what == "del" and node in model:
                del m[node]
                del model[node]
            elif what == "pop":
                assert m.pop(node, None) == model.pop(node, None)
            elif what == "copy" and len(maps) < 4:
                maps.append(m.copy())
                models.append(dict(model))
            elif what == "clear":
                m.clear()
                model.clear()
            elif what == "update":
                m.update({node: value})
                model.update({node: value})
            for mm, mo in zip(maps, models, strict=True):
                _check(mm, mo)
        assert NodeDesc("a", 0) not in NodeMap() and "not a node" not in maps[0]
    finally:
        nodemap.CHUNK = old


def test_a_copy_shares_chunks_until_it_changes_one() -> None:
    """What makes a version cheap: a copy holds the same chunk objects; changing one entry
    replaces exactly one chunk, in the copy only."""
    m = NodeMap({NodeDesc(f"n{i:05}", i): i for i in range(1000)})
    c = m.copy()
    assert all(a is b for a, b in zip(m._chunks, c._chunks, strict=True))
    c[NodeDesc("n00500", 500)] = -1
    changed = [i for i, (a, b) in enumerate(zip(m._chunks, c._chunks, strict=True)) if a is not b]
    assert len(changed) == 1
    assert m[NodeDesc("n00500", 500)] == 500
    assert c[NodeDesc("n00500", 500)] == -1
    m[NodeDesc("n00001", 1)] = -2  # the original copies on write too
    assert c[NodeDesc("n00001", 1)] == 1


def test_missing_keys_raise_key_error() -> None:
    m = NodeMap({NodeDesc("b", 1): 1})
    for probe in (NodeDesc("a", 1), NodeDesc("c", 1)):
        with pytest.raises(KeyError):
            m[probe]
        with pytest.raises(KeyError):
            del m[probe]
        assert m.get(probe, 7) == 7
    with pytest.raises(ValueError):
        NodeMap().least()
