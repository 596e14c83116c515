"""The checks read one vocabulary: every kind a check reads is a protocol-neutral one, no
check module names a protocol's own kinds (nor the fast fidelity's summaries), and each
protocol's mapping reads its events as the neutral events they are, chosen by the
protocol ``run_start`` names; a witness is still the recorded event."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.checks import CHECKS, Violation
from elastic_sim.checks.contracts import protocol_of
from elastic_sim.checks.facts import Limits, limits_of, run_limits
from elastic_sim.checks.reads import TRACES, check_reads
from elastic_sim.history import History
from elastic_sim.registry import BUILTIN_PROTOCOLS
from elastic_sim.trace import STRETCH, TraceEvent
from elastic_sim.trace_kinds import (
    BY_KIND,
    EVENT_KINDS,
    NEUTRAL_KINDS,
    PROTOCOL_SOURCES,
    SHARED_KINDS,
    TRANSLATED_BY_KIND,
    TRANSLATED_KINDS,
    field_names,
)
from elastic_sim.vocabulary import Fact, amended, every_protocol, recorded, vocabulary_for

CHECKS_DIR = Path(__file__).resolve().parents[2] / "elastic_sim" / "checks"
OWN_KINDS = [k.kind for k in EVENT_KINDS if k.source in PROTOCOL_SOURCES]
"""The kinds one protocol records in its own dialect."""


@cache
def _traces() -> list[list[TraceEvent]]:
    from elastic_sim.builtin import builtin_dir
    from elastic_sim.pipeline import simulate
    from elastic_sim.scenario import load_scenario

    out = []
    for name in TRACES:
        sc = load_scenario(builtin_dir() / f"{name}.yaml")
        out.append(list(simulate(sc, sc.seed)[0].raw))
    return out


def test_every_kind_a_check_reads_is_a_neutral_one() -> None:
    """Probed over a trace of every built-in protocol, read as the checks read it, and
    scanned in each check's source: no check compares an event's kind with a kind that is
    not neutral (a recorded kind of one protocol, or the summaries')."""
    every = [*(k.kind for k in EVENT_KINDS), *NEUTRAL_KINDS]
    reads = check_reads(_traces(), every)
    assert set(reads) == {c.__name__ for c in CHECKS}
    foreign = {name: [k for k in kinds if k not in NEUTRAL_KINDS] for name, kinds in reads.items()}
    assert {name: kinds for name, kinds in foreign.items() if kinds} == {}
    assert all(reads.values())  # each reads something: the probe works


def test_no_check_module_names_a_protocols_own_kind_or_the_summaries() -> None:
    named = {}
    for path in sorted(CHECKS_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        words = set(re.findall(r"\w+", text))
        found = sorted(words & {*OWN_KINDS, STRETCH, "STRETCH", "SUMMARISED", "Stretch",
                                "stretches"})
        if found:
            named[path.name] = found
    assert named == {}


def test_the_neutral_vocabulary_is_the_shared_kinds_and_the_translated_ones() -> None:
    assert not set(SHARED_KINDS) & set(OWN_KINDS) and STRETCH not in SHARED_KINDS
    assert not set(TRANSLATED_BY_KIND) & set(BY_KIND)  # no neutral kind is a recorded one
    assert len(set(NEUTRAL_KINDS)) == len(NEUTRAL_KINDS)
    mapped = {neutral for neutral, _ in every_protocol().events.values()}
    assert mapped == set(TRANSLATED_BY_KIND)  # each is some protocol's, none is unused


@pytest.mark.parametrize("protocol", sorted(BUILTIN_PROTOCOLS))
def test_a_protocol_maps_only_its_own_kinds_onto_neutral_ones(protocol: str) -> None:
    own = vocabulary_for(protocol)
    assert own is not every_protocol()
    for kind, (neutral, _) in own.events.items():
        assert BY_KIND[kind].source == protocol, kind
        assert neutral in TRANSLATED_BY_KIND, kind
    for name, knob, _ in own.claims:
        assert name == protocol and knob in field_names_of_knobs(protocol)


def field_names_of_knobs(protocol: str) -> set[str]:
    knobs = BUILTIN_PROTOCOLS[protocol].knobs
    assert knobs is not None
    return {f.name for f in fields(knobs)}


def ev(kind: str, host: str = "h1", **data: Any) -> TraceEvent:
    return TraceEvent(2.0, host, f"{host}/main", kind, data)


MAPPED: list[tuple[str, TraceEvent, str, dict[str, Any]]] = [
    ("torchelastic", ev("rdzv_complete", round=3, members=["h0:1", "h1:1"]),
     "epoch_decided", {"round": 3, "members": ["h0:1", "h1:1"]}),
    ("torchelastic", ev("rdzv_complete", round=3), "epoch_decided", {"round": 3}),
    ("torchelastic", ev("agent_state", state="HEALTHY", remaining_restarts=2),
     "restarts_left", {"left": 2}),
    ("torchelastic", ev("agent_restart", reason="FAILED", remaining_restarts=1),
     "restart", {"failure": True, "spent": True, "left": 1}),
    ("torchelastic", ev("agent_restart", reason="UNHEALTHY", remaining_restarts=0),
     "restart", {"failure": True, "spent": True, "left": 0}),
    ("torchelastic", ev("agent_restart", reason="nodes_waiting", nodes_waiting=1),
     "restart", {"failure": False, "spent": False, "left": None}),
    ("torchelastic", ev("workers_started", round=2, base_rank=0, world_size=2,
                        restart_count=1), "restart_count", {"round": 2, "count": 1}),
    ("torchelastic", ev("exit_barrier_enter", "h2", round=4, world_size=3),
     "barrier_enter", {"round": 4, "party": "h2", "parties": 3}),
    ("torchelastic", ev("exit_barrier_enter", round=4), "barrier_enter",
     {"round": 4, "party": "h1", "parties": None}),  # torchrun's converted traces
    ("torchelastic", ev("exit_barrier_done", round=4), "barrier_trip", {"round": 4}),
    ("torchelastic", ev("exit_barrier_failed", error="StoreTimeout"), "barrier_fail",
     {"error": "StoreTimeout"}),
    ("torchelastic", ev("rdzv_shutdown", closed=True), "rendezvous_closed", {}),
    ("torchelastic", ev("rdzv_shutdown_failed", error="RendezvousClosedError"),
     "rendezvous_close_failed", {"error": "RendezvousClosedError"}),
    ("horovod", ev("hvd_assign", rendezvous=3, world_size=2, ranks={"h1:0": 0, "h2:0": 1},
                   spawn=1), "epoch_assigned",
     {"round": 3, "ranks": {"h1:0": 0, "h2:0": 1}, "resets": 2}),
    ("horovod", ev("hvd_assign", rendezvous="3 (h0 incarnation 2)", ranks={}),
     "epoch_assigned", {"round": "3 (h0 incarnation 2)", "ranks": {}, "resets": None}),
    ("horovod", ev("hvd_discovery", poll=4, update="added", hosts=["h1:2", "h3:1"]),
     "offered", {"hosts": ["h1", "h3"]}),
    ("horovod", ev("hvd_blacklist", "h0", target="h2", cooldown_end=31.5, kill=True),
     "evict", {"host": "h2", "until": 31.5}),
    ("horovod", ev("hvd_blacklist", "h0", target="h2", cooldown_end=None, kill=True),
     "evict", {"host": "h2", "until": None}),
    ("horovod", ev("hvd_scheduled_exit", mode="exception", epoch=1, batch=2, start_rank=0),
     "injected_failure", {}),
    ("horovod", ev("hvd_exit", error="RuntimeError: boom", code=1), "worker_error",
     {"error": "RuntimeError: boom"}),
    ("horovod", ev("hvd_abort", error="RemovedFromJob"), "abort", {"error": "RemovedFromJob"}),
    ("torchft", ev("ft_replica_start", "g1", attempt=2, ranks=1),
     "restart", {"failure": True, "spent": True, "left": None}),
]
"""(protocol, a recorded event, the neutral kind and fields it is read as)."""


def start(protocol: str | None, **knobs: Any) -> TraceEvent:
    data: dict[str, Any] = {"scenario": "t", "seed": 0, "mode": "sim", "knobs": knobs}
    if protocol is not None:
        data["protocol"] = protocol
    return TraceEvent(0.0, "*", "elastic-sim", "run_start", data)


@pytest.mark.parametrize(("protocol", "raw", "kind", "data"), MAPPED,
                         ids=[f"{m[1].kind}-{i}" for i, m in enumerate(MAPPED)])
def test_a_recorded_event_reads_as_its_neutral_event(protocol: str, raw: TraceEvent,
                                                     kind: str, data: dict[str, Any]) -> None:
    for name in (protocol, None):  # its own protocol's reading, and a nameless trace's
        first = start(name)
        read = History([first, raw]).neutral
        got = read.raw[1]
        assert isinstance(got, Fact) and recorded(got) is raw
        assert (got.t, got.host, got.proc, got.kind, dict(got.data)) == (
            raw.t, raw.host, raw.proc, kind, data)
        assert set(data) <= set(field_names(TRANSLATED_BY_KIND[kind]))
        assert read.raw[0] is first  # a shared kind reads as recorded


def test_an_event_that_means_nothing_to_the_checks_stays_as_recorded() -> None:
    kept = [ev("rdzv_shutdown", closed=False), ev("hvd_notify", to="h1", timestamp=1.0,
                                                  update="added"),
            ev("rdzv_rejected", round=1), ev("rdzv_done", round=1, members=["h1"], rank=0,
                                              world_size=1), ev("my_own_kind", x=1),
            ev("ft_replica_start", "g1", attempt=0, ranks=1)]  # a first start: no restart
    hist = History([start("torchelastic"), *kept])
    assert hist.neutral is hist  # nothing to read otherwise: the history is its own view
    assert all(a is b for a, b in zip(History([start(None), *kept]).neutral.raw[1:], kept,
                                      strict=True))


def test_the_protocol_run_start_names_chooses_the_reading() -> None:
    """A trace reads in its own protocol's vocabulary: another protocol's kinds in it are
    no events of the checks'; a trace that names no protocol (or one without a vocabulary,
    a variant run by its own entry) reads every built-in protocol's kinds."""
    blacklist = ev("hvd_blacklist", "h0", target="h2", cooldown_end=None, kill=True)
    assert History([start("horovod"), blacklist]).neutral.raw[1].kind == "evict"
    assert History([start("torchelastic"), blacklist]).neutral.raw[1] is blacklist
    for name in (None, "static-no-rollback"):
        assert History([start(name), blacklist]).neutral.raw[1].kind == "evict"


def test_a_witness_is_the_recorded_event() -> None:
    raw = ev("hvd_assign", "h0", rendezvous=2, ranks={"h1:0": 0})
    fact = History([start("horovod"), raw]).neutral.raw[1]
    assert Violation("m", [fact]).witness == [raw]
    united = amended(fact, members=["h1", "h2"])
    assert united.kind == "epoch_assigned" and united.get("members") == ["h1", "h2"]
    assert Violation("m", [united]).witness == [
        TraceEvent(raw.t, raw.host, raw.proc, "hvd_assign", {**raw.data,
                                                            "members": ["h1", "h2"]})]


def test_the_neutral_reading_keeps_every_event_at_its_place() -> None:
    for raw in _traces():
        hist = History(raw)
        read = hist.neutral
        assert read.keys is hist.keys and read.stretches is hist.stretches
        assert len(read.raw) == len(hist.raw)
        assert [recorded(e) for e in read.raw] == hist.raw
        assert [recorded(e) for e in read.plain] == hist.plain
        assert all((e.kind in TRANSLATED_BY_KIND) == isinstance(e, Fact) for e in read.raw)
        assert not {e.kind for e in read.raw} & {k for k in OWN_KINDS
                                                  if k in every_protocol().events
                                                  and k != "rdzv_shutdown"}
        assert read.neutral is read


TE = {"min_nodes": 2, "max_nodes": 4, "max_restarts": 3, "monitor_interval": 0.1,
      "last_call_timeout": 1.0, "keep_alive_interval": 5.0, "keep_alive_max_attempt": 3,
      "heartbeat_timeout": 30.0, "pg_timeout": 60.0, "read_timeout": 60.0,
      "join_timeout": 600.0, "stop_timeout": 30.0}
HVD = {"np": 4, "min_np": 3, "max_np": 8, "slots_per_host": 2, "reset_limit": 2,
       "discovery_period": 1.0, "discovery_wait": 3.0, "process_start_latency": 0.2,
       "gloo_timeout": 30.0, "kill_grace": 5.0, "elastic_timeout": 600.0,
       "connect_timeout": 127.0}
STATIC = {"min_hosts": 2, "max_hosts": 3, "last_call": 1.0, "group_timeout": 30.0,
          "store_timeout": 60.0, "join_timeout": 600.0}


def test_each_protocol_reads_its_own_knobs_as_limits() -> None:
    def numbers(limits: Limits | None) -> Limits:
        assert limits is not None
        return replace(limits, progress_by="", rejoin_by="")

    settle = 2 * (0.1 + 1.0 + 5.0 * 3) + 30.0 + 60.0
    # progress: each phase of a recovery once (the longer of the group and store read
    # timeouts, the stop, the join timeout or a round's periods); a death is seen when its
    # heartbeat expires (5 s x 3), plus the last call and the polls
    assert numbers(limits_of(TE, "torchelastic")) == Limits(
        2, 4, 3, True, settle, 60.0 + 30.0 + 600.0, 600.0, "",
        5.0 * 3 + 1.0 + 2 * (0.1 + 1.0 + 1.0) + 0.3)
    settle = 2 * 1.0 + 3.0 + 0.2 + 30.0 + 5.0
    # hosts come from discovery: none waits to be incorporated before its first answer;
    # a world lists a host once per slot
    assert numbers(limits_of(HVD, "horovod")) == Limits(2, 4, 2, False, settle,
                                                        600.0 + settle, 600.0,
                                                        discovered=True, slots_listed=True)
    assert numbers(limits_of({**HVD, "reset_limit": None, "max_np": None}, "horovod")) == \
        Limits(2, None, None, False, settle, 600.0 + settle, 600.0, discovered=True,
               slots_listed=True)
    settle = 2 * 1.0 + 30.0 + 60.0
    assert numbers(limits_of(STATIC, "static")) == Limits(2, 3, None, False, settle,
                                                          600.0 + settle, 600.0)
    te = limits_of(TE, "torchelastic")
    assert te is not None and "pg_timeout 60 s" in te.progress_by
    assert "keep_alive_max_attempt 15 s" in te.rejoin_by
    for knobs, name in ((TE, "torchelastic"), (HVD, "horovod"), (STATIC, "static")):
        assert limits_of(knobs) == limits_of(knobs, name)  # a nameless trace: told by its knobs
        assert protocol_of([start(None, **knobs)]) == name
        assert run_limits([start(name, **knobs)]) == limits_of(knobs, name)
    assert limits_of(STATIC, "torchelastic") is None  # not its knobs
    assert limits_of({"my_knob": 1}) is None
    knobs_of = {"torchelastic": TE, "horovod": HVD, "static": STATIC}
    for name, _, read in every_protocol().claims:
        assert set(read(knobs_of[name])) == {f.name for f in fields(Limits)}


def test_every_translated_kind_is_documented_with_its_fields() -> None:
    for k in TRANSLATED_KINDS:
        assert k.meaning and all(d for _, d in k.fields), k.kind


def test_horovods_host_limits_count_the_slots_discovery_offers_per_host() -> None:
    """-np 4 --min-np 2 --max-np 4 over hosts of two slots: one host holds min_np and
    two use max_np (the checks once took a host for a slot: 2 and 4)."""
    from elastic_sim.protocols.horovod.vocabulary import limits

    two = {"np": 4, "min_np": 2, "max_np": 4,
           "discovery": {"hosts": ["h1:2", "h2:2", "h3:2"]}}
    assert (limits(two)["min_hosts"], limits(two)["max_hosts"]) == (1, 2)
    mixed = {"min_np": 3, "max_np": 8, "slots_per_host": 2,  # bare names: slots_per_host
             "discovery": {"schedule": [{"at": 0, "hosts": ["a:4", "b"]}],
                           "random": {"hosts": ["c:1"]}}}
    assert (limits(mixed)["min_hosts"], limits(mixed)["max_hosts"]) == (1, 8)
    bare = {"np": 2, "min_np": 2, "max_np": 4, "slots_per_host": 1,
            "discovery": {"hosts": ["h1", "h2"]}}
    assert (limits(bare)["min_hosts"], limits(bare)["max_hosts"]) == (2, 4)
