"""A run as a Chrome trace (JSON object format), which ui.perfetto.dev and chrome://tracing
open: one process (pid) per host, one thread (tid) per process of the job, and a
``faults`` thread on every host a fault hit.

On a process's thread, complete events ("X") nest: phases (rendezvous, sync, training)
hold steps, steps hold collectives. Faults are global instant events ("i", scope "g") and,
when they last, complete events on the faults thread. The world size is a counter ("C").
Times are microseconds of run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elastic_sim.reports.metrics import rounds_of, world_size_series
from elastic_sim.reports.spans import (
    FaultSpan,
    ProcessTimeline,
    end_time_of,
    fault_spans,
    host_key,
    timelines,
)
from elastic_sim.trace import TraceEvent

RUN_PID = 0
"""The pseudo-process holding run-wide tracks (world size, run start and end)."""
FAULTS_TID = 999_999
"""Thread id of a host's faults track (job processes get 1, 2, ...)."""


def _us(t: float) -> float:
    return round(t * 1e6, 3)


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _slice(name: str, cat: str, start: float, end: float, pid: int, tid: int,
           args: dict[str, Any] | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"name": name, "cat": cat, "ph": "X", "ts": _us(start),
                          "dur": max(0.0, round(_us(end) - _us(start), 3)), "pid": pid,
                          "tid": tid}
    if args:
        ev["args"] = args
    return ev


def _instant(name: str, cat: str, t: float, pid: int, tid: int, scope: str,
             args: dict[str, Any] | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"name": name, "cat": cat, "ph": "i", "s": scope, "ts": _us(t),
                          "pid": pid, "tid": tid}
    if args:
        ev["args"] = args
    return ev


def _process_events(tl: ProcessTimeline, pid: int, tid: int, end: float) -> list[dict[str, Any]]:
    """Phases, steps and collectives of one process (nested), plus its instants."""
    out = [_slice(f"{s.state}" + ("" if s.round is None else f" r{s.round}"), s.state,
                  s.start, s.end, pid, tid, {"round": s.round})
           for s in tl.phases]
    training = [s for s in tl.phases if s.state == "training"]
    for span in training:
        prev = span.start
        for t, step in tl.steps:
            if span.start <= t <= span.end:
                out.append(_slice(f"step {step}", "step", prev, t, pid, tid, {"step": step}))
                prev = t
    for c in tl.collectives:
        args: dict[str, Any] = {"group": c.group, "seq": c.seq, "failed": c.failed}
        if c.error:
            args["error"] = c.error
        name = f"{c.op} #{c.seq}" + (" FAILED" if c.failed else "")
        out.append(_slice(name, "collective", c.start, c.end, pid, tid, args))
    out += [_instant("restore", "recovery", t, pid, tid, "t") for t in tl.restores]
    for t, code in tl.exits:
        out.append(_instant(f"exit {code}", "process", t, pid, tid, "t", {"code": code}))
        if code != 0:
            down = next((s for s in tl.overlays if s.state == "down" and s.start == t), None)
            out.append(_slice("down", "down", t, down.end if down else end, pid, tid))
    return _nest(out)


def _nest(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Clip complete events so that on one thread they nest strictly (the format requires
    it; a step's allreduce that ends a hair after the step would otherwise break it)."""
    xs = sorted((e for e in slices if e["ph"] == "X"), key=lambda e: (e["ts"], -e["dur"]))
    stack: list[float] = []
    for e in xs:
        while stack and stack[-1] <= e["ts"]:
            stack.pop()
        if stack and e["ts"] + e["dur"] > stack[-1]:
            e["dur"] = round(stack[-1] - e["ts"], 3)
        stack.append(e["ts"] + e["dur"])
    return xs + [e for e in slices if e["ph"] != "X"]


def _fault_events(f: FaultSpan, pid: int | None) -> list[dict[str, Any]]:
    args = {"id": f.id, "type": f.type, "target": f.target}
    out = [_instant(f"fault {f.id} ({f.type} {f.target})", "fault", f.start, RUN_PID, 0, "g",
                    args)]
    if f.end is not None:
        out.append(_instant(f"heal {f.id}", "fault", f.end, RUN_PID, 0, "g", args))
        if pid is not None:
            out.append(_slice(f"{f.type} {f.id}", "fault", f.start, f.end, pid, FAULTS_TID,
                              args))
    elif pid is not None:
        out.append(_instant(f"{f.type} {f.id}", "fault", f.start, pid, FAULTS_TID, "t", args))
    return out


def chrome_trace(events: Sequence[TraceEvent], tls: Sequence[ProcessTimeline] | None = None,
                 faults: Sequence[FaultSpan] | None = None) -> dict[str, Any]:
    """The Chrome trace event JSON object of a run (``tls`` and ``faults``: the run's
    timelines and fault spans when the caller has them already)."""
    end = end_time_of(events)
    tls = timelines(events) if tls is None else tls
    faults = fault_spans(events) if faults is None else faults
    hosts = sorted({tl.host for tl in tls} | {f.host for f in faults if f.host != "*"},
                   key=host_key)
    pids = {h: i + 1 for i, h in enumerate(hosts)}
    out: list[dict[str, Any]] = [
        _meta("process_name", RUN_PID, 0, {"name": "run"}),
        _meta("process_sort_index", RUN_PID, 0, {"sort_index": 0}),
    ]
    for h, pid in pids.items():
        out.append(_meta("process_name", pid, 0, {"name": h}))
        out.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
    tids: dict[str, int] = {}
    for tl in tls:
        pid = pids[tl.host]
        tid = tids[tl.proc] = len(tids) + 1
        out.append(_meta("thread_name", pid, tid, {"name": tl.proc}))
        out.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
        out += _process_events(tl, pid, tid, end)
    for h in sorted({f.host for f in faults if f.host in pids}, key=host_key):
        out.append(_meta("thread_name", pids[h], FAULTS_TID, {"name": f"{h} faults"}))
    for f in faults:
        out += _fault_events(f, pids.get(f.host))
    for t, w in world_size_series(rounds_of(events)):
        out.append({"name": "world size", "ph": "C", "ts": _us(t), "pid": RUN_PID, "tid": 0,
                    "args": {"world_size": w}})
    start = next((ev for ev in events if ev.kind == "run_start"), None)
    for ev in events:
        if ev.kind in ("run_start", "run_end"):
            out.append(_instant(ev.kind, "run", ev.t, RUN_PID, 0, "g", dict(ev.data)))
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {k: str(v) for k, v in (dict(start.data) if start else {}).items()},
    }
