"""The Perfetto / Chrome trace export: the event format's schema, one track per process."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from elastic_sim.reports.perfetto import chrome_trace
from tests.reports.synth import static_run

NUMBER = (int, float)
COMMON = {"name": str, "ph": str, "pid": int, "tid": int}
"""Keys every event of ours carries, with their types."""
BY_PHASE: dict[str, dict[str, Any]] = {
    "X": {"ts": NUMBER, "dur": NUMBER},
    "i": {"ts": NUMBER, "s": str},
    "C": {"ts": NUMBER, "args": dict},
    "M": {"args": dict},
}
"""Required keys per phase of the Chrome trace event format (the subset we write)."""
METADATA_ARGS = {"process_name": ("name", str), "thread_name": ("name", str),
                 "process_sort_index": ("sort_index", int),
                 "thread_sort_index": ("sort_index", int)}


def schema_errors(doc: Any) -> list[str]:
    """Everything that breaks the Chrome trace event format (JSON object form)."""
    errors: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["top level must be an object with a traceEvents list"]
    if doc.get("displayTimeUnit") not in (None, "ms", "ns"):
        errors.append(f"displayTimeUnit {doc.get('displayTimeUnit')!r}")
    for i, ev in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{i}] ({ev.get('ph')} {ev.get('name')!r})"
        for key, typ in {**COMMON, **BY_PHASE.get(ev.get("ph"), {})}.items():
            if not isinstance(ev.get(key), typ) or isinstance(ev.get(key), bool):
                errors.append(f"{where}: {key} missing or not {typ}")
        if ev.get("ph") not in BY_PHASE:
            errors.append(f"{where}: unknown phase")
        if isinstance(ev.get("ts"), NUMBER) and ev["ts"] < 0:
            errors.append(f"{where}: negative ts")
        if ev.get("ph") == "X" and isinstance(ev.get("dur"), NUMBER) and ev["dur"] < 0:
            errors.append(f"{where}: negative dur")
        if ev.get("ph") == "i" and ev.get("s") not in ("g", "p", "t"):
            errors.append(f"{where}: instant scope must be g, p or t")
        if ev.get("ph") == "C" and not all(isinstance(v, NUMBER)
                                           for v in ev.get("args", {}).values()):
            errors.append(f"{where}: counter values must be numbers")
        if ev.get("ph") == "M":
            key, typ = METADATA_ARGS.get(ev.get("name"), ("", object))
            if not key or not isinstance(ev.get("args", {}).get(key), typ):
                errors.append(f"{where}: metadata needs args.{key or '?'}")
        if "args" in ev and not isinstance(ev["args"], dict):
            errors.append(f"{where}: args must be an object")
    return errors


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    # Round-trip through JSON text: what ui.perfetto.dev actually reads.
    doc: dict[str, Any] = json.loads(json.dumps(chrome_trace(static_run()), allow_nan=False))
    return doc


def test_export_passes_the_chrome_trace_event_schema(doc: dict[str, Any]) -> None:
    assert schema_errors(doc) == []
    assert doc["displayTimeUnit"] == "ms"


def test_the_schema_check_rejects_broken_events() -> None:
    bad = {"traceEvents": [{"name": "x", "ph": "X", "pid": 1, "tid": 1, "ts": 5},
                           {"name": "f", "ph": "i", "pid": 1, "tid": 1, "ts": 1, "s": "q"},
                           {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {}}]}
    assert len(schema_errors(bad)) == 3


def test_one_process_track_per_host_and_one_thread_per_process(doc: dict[str, Any]) -> None:
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    hosts = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
               if e["name"] == "thread_name"}
    assert sorted(hosts.values()) == ["h0", "h1", "h2", "h3", "run"]
    procs = {name: hosts[pid] for (pid, _), name in threads.items()}
    assert {p: h for p, h in procs.items() if p.endswith("/main")} == {
        f"h{i}/main": f"h{i}" for i in range(4)}
    assert procs["h3 faults"] == "h3"


def test_phases_are_complete_events_in_microseconds_that_nest(doc: dict[str, Any]) -> None:
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] == "thread_name"}
    slices = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            slices[names[(e["pid"], e["tid"])]].append(e)
    h0 = slices["h0/main"]
    assert [e["name"] for e in h0 if e["cat"] in ("rendezvous", "sync", "training")] == [
        "rendezvous r0", "sync r0", "training r0", "rendezvous r1", "sync r1", "training r1"]
    rdzv1 = next(e for e in h0 if e["name"] == "rendezvous r1")
    assert (rdzv1["ts"], rdzv1["dur"]) == (2_708_000, 1_000_000)
    failed = [e for e in h0 if e["cat"] == "collective" and e["args"]["failed"]]
    assert len(failed) == 1 and failed[0]["ts"] + failed[0]["dur"] == 2_708_000
    assert any(e["name"] == "step 60" for e in h0)
    for proc, evs in slices.items():  # strictly nested on every thread
        stack: list[float] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            assert not stack or e["ts"] + e["dur"] <= stack[-1], f"{proc}: {e['name']}"
            stack.append(e["ts"] + e["dur"])


def test_faults_are_global_instants_and_world_size_a_counter(doc: dict[str, Any]) -> None:
    faults = [e for e in doc["traceEvents"] if e["ph"] == "i" and e.get("cat") == "fault"
              and e["s"] == "g"]
    assert [(e["name"], e["ts"]) for e in faults] == [("fault crash-h3 (crash h3)", 2_550_000)]
    counters = [(e["ts"], e["args"]["world_size"]) for e in doc["traceEvents"]
                if e["ph"] == "C"]
    assert counters == [(3_000, 4), (3_708_000, 3)]


def test_spans_handed_over_give_the_same_trace_as_spans_recomputed() -> None:
    from elastic_sim.reports.spans import fault_spans, timelines

    events = static_run(crash_host="h3")
    assert chrome_trace(events, timelines(events), fault_spans(events)) == chrome_trace(events)
