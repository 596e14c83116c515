"""The trace line encoder writes exactly what ``json.dumps`` of the event's object writes
(its parts are cached and assembled by hand for speed): any text, any JSON data."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_sim.trace import TIME_DECIMALS, TraceEvent, decode, encode

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def reference(ev: TraceEvent) -> str:
    return json.dumps({"t": round(ev.t, TIME_DECIMALS), "host": ev.host, "proc": ev.proc,
                       "kind": ev.kind, "data": dict(ev.data)},
                      separators=(",", ":"), allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(t=st.floats(min_value=0, max_value=1e12) | st.integers(0, 10**9),
       host=st.text(max_size=8), proc=st.text(max_size=8), kind=st.text(max_size=8),
       data=st.dictionaries(st.text(max_size=6), _json, max_size=5))
def test_a_line_is_what_json_dumps_writes(t: float, host: str, proc: str, kind: str,
                                          data: dict[str, Any]) -> None:
    ev = TraceEvent(t, host, proc, kind, data)
    assert encode(ev) == reference(ev)
    assert encode(ev) == encode(ev)  # the cached parts give the same line again
    assert decode(encode(ev)).data == json.loads(reference(ev))["data"]


@pytest.mark.parametrize("t", [float("nan"), float("inf"), -float("inf")])
def test_a_time_that_is_not_a_number_is_refused(t: float) -> None:
    with pytest.raises(ValueError):
        encode(TraceEvent(t, "h0", "h0/main", "step", {}))
