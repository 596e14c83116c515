"""A barrier trips only once as many distinct parties as it waits for are in it, for every
barrier a trace records: torchelastic's exit barrier (each agent's entry) and Horovod's
registry barrier, which the driver's trip records with the slots it counted (upstream's
``WorkerStateRegistry._record_state`` logs "key exists" for a slot that records READY again,
a client's retried rank_and_size, and still waits on the barrier: the slot is counted
twice, and the barrier trips with another slot missing)."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks.hosts import healthy_hosts_kept
from elastic_sim.trace import TraceEvent

SLOTS = ["localhost:0", "localhost:1", "127.0.0.1:0", "127.0.0.1:1"]


def ev(t: float, host: str, kind: str, proc: str = "", **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def horovod(counted: list[str]) -> list[TraceEvent]:
    """Rendezvous 1 assigns the four slots; its barrier trips having counted ``counted``."""
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="localhost",
               protocol="horovod", knobs={"np": 4, "min_np": 2, "max_np": 4,
                                          "slots_per_host": 2, "reset_limit": None})
    return [start, *(ev(0.0, h, "proc_start") for h in ("localhost", "127.0.0.1")),
            ev(0.1, "localhost", "hvd_assign", rendezvous=1, world_size=4,
               ranks={s: r for r, s in enumerate(SLOTS)}, spawn=SLOTS),
            ev(5.0, "localhost", "hvd_trip", rendezvous=1, decision="reset", blacklist=[],
               states=dict.fromkeys(counted, "READY")),
            ev(6.0, "*", "run_end", "elastic-sim", outcome="completed")]


def test_the_registry_barrier_of_every_slot_passes() -> None:
    res = healthy_hosts_kept(horovod(SLOTS))
    assert res.ok and res.checked == 1


def test_a_registry_barrier_that_counted_a_slot_twice_is_caught() -> None:
    res = healthy_hosts_kept(horovod(SLOTS[:3]))
    (v,) = res.violations
    assert v.message == ("the barrier of round 1 tripped with 3 of its 4 parties in it "
                         "(127.0.0.1:0, localhost:0, localhost:1); not in it: 127.0.0.1:1")
    assert [e.kind for e in v.witness] == ["hvd_assign", "hvd_trip"]


def test_the_registry_slot_recorded_twice_is_the_witness() -> None:
    """The registry records each call (hvd_record): 127.0.0.1:0's retried READY counts a
    second time, and the barrier trips without 127.0.0.1:1. Both records of the slot
    counted twice are witnesses."""
    h = horovod(SLOTS[:3])
    records = [ev(1.0 + i / 10, "localhost", "hvd_record", rendezvous=1, slot=slot,
                  state="READY", parties=4) for i, slot in enumerate([*SLOTS[:3], SLOTS[2]])]
    at = next(i for i, e in enumerate(h) if e.kind == "hvd_trip")
    (v,) = healthy_hosts_kept([*h[:at], *records, *h[at:]]).violations
    assert v.message == ("the barrier of round 1 tripped with 3 of its 4 parties in it "
                         "(127.0.0.1:0, localhost:0, localhost:1); 127.0.0.1:0 counted twice; "
                         "not in it: 127.0.0.1:1")
    assert [(e.t, e.kind, e.get("slot")) for e in v.witness] == [
        (1.2, "hvd_record", "127.0.0.1:0"), (1.3, "hvd_record", "127.0.0.1:0"),
        (0.1, "hvd_assign", None), (5.0, "hvd_trip", None)]


def test_an_exit_barrier_party_counted_twice_is_its_witness() -> None:
    start = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0",
               protocol="torchelastic", knobs={"min_nodes": 2, "max_nodes": 3,
                                               "max_restarts": 3})
    h = [start, *(ev(0.0, x, "proc_start") for x in ("h0", "h1", "h2")),
         *(ev(1.0, x, "rdzv_done", round=0, members=["h0", "h1", "h2"], rank=i, world_size=3)
           for i, x in enumerate(("h0", "h1", "h2"))),
         ev(9.0, "h1", "exit_barrier_enter", round=0, world_size=3),
         ev(9.1, "h2", "exit_barrier_enter", round=0, world_size=3),
         ev(9.2, "h2", "exit_barrier_enter", round=0, world_size=3),
         ev(9.3, "h1", "exit_barrier_done", round=0),
         ev(10.0, "*", "run_end", "elastic-sim", outcome="completed")]
    (v,) = healthy_hosts_kept(h).violations
    assert v.message == ("the barrier of round 0 tripped with 2 of its 3 parties in it "
                         "(h1, h2); h2 counted twice; not in it: h0")
    assert [(e.t, e.kind) for e in v.witness] == [
        (9.0, "exit_barrier_enter"), (9.1, "exit_barrier_enter"),
        (9.2, "exit_barrier_enter"), (9.3, "exit_barrier_done")]
