"""What a report shows of one run, computed once from its trace and its summary.json."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_sim.history import History, history
from elastic_sim.reports.metrics import (
    Goodput,
    Metrics,
    Restarts,
    compute,
    goodput,
    restarts_of,
    round_ends,
    world_size_series,
)
from elastic_sim.reports.spans import (
    FaultSpan,
    ProcessTimeline,
    end_time_of,
    fault_spans,
    timelines,
)
from elastic_sim.trace import RecordError, TraceEvent


@dataclass
class RunView:
    """One run, ready to draw: the summary as written, plus what the trace says."""

    summary: Mapping[str, Any]
    events: Sequence[TraceEvent]
    end: float
    timelines: list[ProcessTimeline]
    faults: list[FaultSpan]
    metrics: Metrics
    goodput: Goodput
    restarts: Restarts
    round_ends: dict[int, float]
    world_series: list[tuple[float, int]]

    @property
    def name(self) -> str:
        """The scenario's name."""
        return str(self.summary.get("scenario", {}).get("name", "run"))

    @property
    def hosts(self) -> list[str]:
        """Hosts that ran a job process, in timeline order."""
        return list(dict.fromkeys(tl.host for tl in self.timelines))


def build_view(events: Sequence[TraceEvent], summary: Mapping[str, Any],
               metrics: Metrics | None = None) -> RunView:
    """Fold a trace and its summary into a :class:`RunView`, with the run's ``metrics`` as
    they were judged (None: worked out of the trace here, once: a run read back from its
    files). A summary that lacks a field (an older run, a hand-made trace) falls back to
    what the trace records."""
    end = float(summary.get("metrics", {}).get("end_time") or end_time_of(events))
    events = history(events)  # the expanded view, made once for every drawing
    if metrics is None:
        metrics = _metrics_of(events, summary, end)
    return RunView(
        summary=summary,
        events=events,
        end=end,
        timelines=timelines(events),
        faults=fault_spans(events),
        metrics=metrics,
        goodput=goodput(events, metrics.rounds, end, metrics.stalls, metrics.rollbacks),
        restarts=restarts_of(events, metrics.rounds),
        round_ends=round_ends(events, metrics.rounds, end),
        world_series=world_size_series(metrics.rounds),
    )


def _metrics_of(events: History, summary: Mapping[str, Any], end: float) -> Metrics:
    """A run's metrics worked out of its trace, with what its summary says of the job (the
    trace's own events where the summary is silent)."""
    run_end = events.last("run_end")
    exit_codes = summary.get("exit_codes") or (run_end.get("exit_codes", {}) if run_end else {})
    steps_in_trace = max([int(ev.get("step", 0)) for ev in events.recorded("step")]
                         + [st.first + st.steps - 1 for st in events.stretches
                            if st.step_events],
                         default=0)
    total = int(summary.get("scenario", {}).get("workload", {}).get("steps", steps_in_trace))
    hung = bool(summary.get("hung", run_end is not None and run_end.get("outcome") == "hung"))
    batch = int(summary.get("scenario", {}).get("workload", {}).get("batch_size", 1))
    return compute(events, total, dict(exit_codes), hung, end, batch)


_OBJ, _LIST, _NUM = "an object", "a list", "a number"
_SUMMARY_SHAPE: dict[str, str] = {
    "scenario": _OBJ, "scenario.workload": _OBJ, "scenario.protocol": _OBJ,
    "scenario.name": "a string", "scenario.workload.steps": "an integer",
    "scenario.workload.batch_size": "an integer", "metrics": _OBJ, "metrics.end_time": _NUM,
    "metrics.recoveries": _LIST, "metrics.outcome": "a string", "checks": _LIST,
    "expectations": _LIST, "faults": _LIST, "exit_codes": _OBJ, "hung": "a boolean",
    "seed": "an integer", "exit_code": "an integer", "verdict": "a string", "mode": "a string",
}
_IS: dict[str, Callable[[Any], bool]] = {
    _OBJ: lambda v: isinstance(v, dict),
    _LIST: lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    _NUM: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "an integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "a string": lambda v: isinstance(v, str),
    "a boolean": lambda v: isinstance(v, bool),
}


def read_summary(path: Path) -> dict[str, Any]:
    """A run's summary.json, checked for the shape the reports read; :class:`RecordError`
    naming the line (not JSON) or the field (wrong type) of the first problem."""
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), f"line {exc.lineno}", f"not JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(str(path), "", f"not UTF-8 text ({exc.reason})") from None
    if not isinstance(obj, dict):
        raise RecordError(str(path), "", f"expected a JSON object, got {type(obj).__name__}")
    for where, what in _SUMMARY_SHAPE.items():
        parent: Any = obj
        *outer, key = where.split(".")
        for part in outer:
            parent = parent.get(part, {})
        value = parent.get(key)
        if value is not None and not _IS[what](value):
            shown = ("a list with a non-object item" if what == _LIST and isinstance(value, list)
                     else f"{type(value).__name__} {value!r}")
            raise RecordError(str(path), where, f"expected {what}, got {shown:.60}")
    return obj
