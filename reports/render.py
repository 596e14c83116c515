"""Write every report of one run next to its trace: the plots, report.html and
trace.perfetto.json. ``elastic-sim run`` calls :func:`write_reports`;
``elastic-sim report RUN_DIR`` calls :func:`render_run_dir`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic_sim.history import History
from elastic_sim.reports.html import render_html
from elastic_sim.reports.metrics import Metrics
from elastic_sim.reports.perfetto import chrome_trace
from elastic_sim.reports.plots import recovery_png, timeline_png, world_size_png
from elastic_sim.reports.view import RunView, build_view, read_summary
from elastic_sim.trace import TraceEvent, iter_trace

REPORT_FILE = "report.html"
PERFETTO_FILE = "trace.perfetto.json"


def plot_images(view: RunView) -> dict[str, bytes | None]:
    """The run's plots as PNG bytes, by name (None: nothing to draw)."""
    m = view.metrics
    title = (f"{view.name}: {len(view.timelines)} processes on {len(view.hosts)} hosts, "
             f"world {' → '.join(map(str, m.world_sizes)) or '—'}")
    return {
        "timeline": timeline_png(view.timelines, view.faults, m.rounds, m.recoveries, view.end,
                                 title=title, stalls=m.stalls),
        "world_size": world_size_png(view.timelines, view.faults, m.rounds, m.recoveries,
                                     view.end, view.world_series, m.stalls),
        "recovery": recovery_png(m.recoveries),
    }


def _write(path: Path, data: bytes) -> Path:
    """Write under a temporary name and rename: readers never see half a file."""
    tmp = path.with_name(path.name + ".part")
    try:
        tmp.write_bytes(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def write_reports(
    out_dir: Path, events: Sequence[TraceEvent], summary: Mapping[str, Any],
    metrics: Metrics | None = None,
) -> list[Path]:
    """Write the plots (``<name>.png``), ``report.html`` and ``trace.perfetto.json`` into
    ``out_dir``; return the paths written, the HTML report first. ``metrics``: the run's,
    as it was judged (None: worked out of the trace, as for a run read back from files)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    view = build_view(events, summary, metrics)
    images = plot_images(view)
    written: list[Path] = []
    try:  # all of them or none: a reader never finds a report of another run's plots
        written.append(_write(out_dir / REPORT_FILE, render_html(view, images).encode("utf-8")))
        for name, png in images.items():
            if png is not None:
                written.append(_write(out_dir / f"{name}.png", png))
        perfetto = json.dumps(chrome_trace(events, view.timelines, view.faults),
                              separators=(",", ":"))
        written.append(_write(out_dir / PERFETTO_FILE, perfetto.encode("utf-8")))
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


def render_run_dir(run_dir: Path) -> list[Path]:
    """Re-render the reports of a finished run from its trace.jsonl and summary.json."""
    trace = run_dir / "trace.jsonl"
    if not trace.is_file():
        raise FileNotFoundError(f"{trace}: no trace (is {run_dir} a run directory?)")
    summary_path = run_dir / "summary.json"
    summary = read_summary(summary_path) if summary_path.is_file() else {}
    return write_reports(run_dir, History(iter_trace(trace)), summary)
