"""Negotiated groups (``Negotiation``, Horovod's controller): collectives match by name too;
one that members submitted under different names stalls (no timeout) while every member
runs and can be reached, and times out only on a member that cannot take part; rank 0's
stall inspector reports the stall past each check period and, with a shutdown time, fails
every member's calls. A plain group times the same mismatch out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.faults.model import HangHost
from elastic_sim.protocols.api import CollectiveError, Negotiation, Runtime
from tests.sim.simutil import h0_store, make_world, of, simulate

M = "tests.sim.test_negotiated_groups"
HOSTS = ("h0", "h1")


async def names_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """h0 broadcasts ``a``, h1 broadcasts ``b`` (or ``a`` too, with ``same``): 8 bytes each."""
    rank = int(rt.host[1:])
    neg = Negotiation(**args["negotiation"]) if "negotiation" in args else None
    g = await rt.new_group(await h0_store(rt), "g", rank, 2, 5.0, neg)
    name = "a" if rank == 0 or args.get("same") else "b"
    try:
        await g.broadcast(bytes(8), 0, name)
        rt.record("done")
    except CollectiveError as exc:
        rt.record("err", error=type(exc).__name__)
    return 0


def _run(args: dict[str, Any], faults: tuple[Any, ...] = (), limit: float = 200.0) -> Any:
    return simulate(make_world(f"{M}:names_main", HOSTS, args, time_limit=limit), faults)


def test_a_plain_group_does_not_match_names() -> None:
    _, ev = _run({})
    assert len(of(ev, "done")) == 2  # Gloo: same op, root and length, whatever the names
    _, ev = _run({"negotiation": {}, "same": True})
    assert len(of(ev, "done")) == 2


def test_a_negotiated_name_mismatch_stalls_and_rank_0_warns_past_each_period() -> None:
    res, ev = _run({"negotiation": {"stall_check_s": 60.0}})
    assert of(ev, "err") == [] and of(ev, "done") == [] and res.hung
    stalls = of(ev, "coll_stall")
    assert {e.proc for e in stalls} == {"h0/main"}
    ready = of(ev, "group_ready")[0].t
    assert [round(e.t - ready, 6) for e in stalls] == [60.001, 120.002, 180.003]
    assert stalls[0].data["submitted"] == {"a": [0], "b": [1]}
    assert stalls[0].data["missing"] == {"0": ["b"], "1": ["a"]}
    assert stalls[0].data["shutdown"] is False


def test_a_frozen_member_still_times_a_negotiated_collective_out() -> None:
    # h1 freezes: the negotiation cannot reach it, so the group timeout applies
    _, ev = _run({"negotiation": {}}, (HangHost("f", 1.0, "h1", 50.0),))
    (err,) = of(ev, "err", "h0/main")
    assert err.data == {"error": "CollectiveTimeout"} and err.t < 60.0


def test_the_stall_shutdown_fails_every_member_at_the_first_check_past_it() -> None:
    _, ev = _run({"negotiation": {"stall_check_s": 60.0, "stall_shutdown_s": 90.0}})
    (stall,) = [e for e in of(ev, "coll_stall") if e.data["shutdown"]]
    errs = of(ev, "err")
    assert {e.data["error"] for e in errs} == {"CollectiveFailed"} and len(errs) == 2
    assert all(e.t == stall.t for e in errs) and 90.0 < stall.data["waited_s"] < 150.0


def test_no_stall_inspector_when_it_is_disabled() -> None:
    res, ev = _run({"negotiation": {"stall_check": False, "stall_shutdown_s": 90.0}})
    assert of(ev, "coll_stall") == [] and of(ev, "err") == [] and res.hung
