"""Plots of one run (matplotlib, Agg, no display): the per-process timeline, the world size
over time and the recovery breakdown per fault. Each returns PNG bytes.

matplotlib is imported inside the functions so that ``import reports`` stays light. At
scale the timeline aggregates processes into groups: a group's row shows, along time, which
fraction of its processes is in each state (a density band), while the processes that
faults hit keep rows of their own.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic_sim.reports.members import process_label
from elastic_sim.reports.metrics import Recovery, RoundInfo
from elastic_sim.reports.progress import Stall
from elastic_sim.reports.spans import STATES, FaultSpan, ProcessTimeline

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

COLORS = {
    "rendezvous": "#4a90d9",
    "sync": "#9467bd",
    "training": "#5cb85c",
    "blocked": "#f0932b",
    "stopped": "#9e9e9e",
    "down": "#37474f",
}
"""Colour of every span state; the HTML legend uses the same."""
FAULT_COLOR = "#d62728"
STALL_COLOR = "#b5651d"
"""Job-wide stalls (live members, no training progress): hatched over every row."""
PHASE_COLORS = {"detect": FAULT_COLOR, "rendezvous": COLORS["rendezvous"],
                "sync": COLORS["sync"], "first_step": COLORS["training"],
                "stall": STALL_COLOR}
"""Colour of each recovery phase (see :meth:`elastic_sim.reports.metrics.Recovery.phases`), and of
the stall of a fault that needed no recovery."""

MAX_ROWS = 40
"""More processes than this and the timeline aggregates them into groups."""
MAX_FOCUS_ROWS = 8
"""Rows kept for processes hit by faults when aggregating."""
BINS = 1000
"""Time resolution of density bands and of the training-process count."""
WIDTH_IN, DPI = 14.0, 100


@dataclass
class Row:
    """One row of the timeline: one process, or a group of processes drawn as a band."""

    label: str
    procs: list[ProcessTimeline]
    grouped: bool


def timeline_rows(tls: Sequence[ProcessTimeline], faults: Sequence[FaultSpan],
                  max_rows: int = MAX_ROWS) -> list[Row]:
    """One row per process, or, past ``max_rows``, the processes on faulted hosts first
    and then groups of consecutive processes (by host order)."""
    if len(tls) <= max_rows:
        return [Row(_label(tl), [tl], False) for tl in tls]
    hit = {f.host for f in faults}
    focus = [tl for tl in tls if tl.host in hit][:MAX_FOCUS_ROWS]
    rows = [Row(f"{_label(tl)} *", [tl], False) for tl in focus]
    per = math.ceil(len(tls) / max(1, max_rows - len(rows)))
    for i in range(0, len(tls), per):
        chunk = list(tls[i:i + per])
        label = f"{chunk[0].proc} .. {chunk[-1].proc} ({len(chunk)})"
        rows.append(Row(label, chunk, True))
    return rows


def _label(tl: ProcessTimeline) -> str:
    return process_label(tl.proc, tl.host, tl.ranks)


def state_matrix(tls: Sequence[ProcessTimeline], end: float, bins: int = BINS) -> np.ndarray:
    """For every process and time bin, the code of its state: 0 none, else 1 + the index
    in :data:`~elastic_sim.reports.spans.STATES`; overlays win over phases."""
    import numpy as np

    mat = np.zeros((len(tls), bins), dtype=np.int8)
    scale = bins / end if end > 0 else 0.0
    for i, tl in enumerate(tls):
        for span in (*tl.phases, *tl.overlays):
            a = min(bins - 1, int(span.start * scale))
            b = max(a + 1, min(bins, math.ceil(span.end * scale)))
            mat[i, a:b] = STATES.index(span.state) + 1
    return mat


def new_figure(height: float) -> Figure:
    """A report-wide figure on the Agg canvas (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def fault_extent(f: FaultSpan, recoveries: Sequence[Recovery], end: float) -> tuple[float, float]:
    """The interval shaded for a fault: until it healed, else until it was detected, else a
    sliver."""
    if f.end is not None:
        return f.start, f.end
    rec = next((r for r in recoveries if r.id == f.id), None)
    if rec is not None and rec.detected_at is not None:
        return f.start, max(rec.detected_at, f.start + end / 400)
    return f.start, f.start + end / 400


def _marks(ax: Axes, faults: Sequence[FaultSpan], rounds: Sequence[RoundInfo],
           recoveries: Sequence[Recovery], end: float, stalls: Sequence[Stall] = ()) -> None:
    """Faults as shaded, labelled intervals; round boundaries as dashed, labelled lines;
    stalls hatched across the whole height. Labels sit above the axes (rounds on the first
    line, faults on the second)."""
    top = ax.get_xaxis_transform()
    for st in stalls:
        ax.axvspan(st.start, st.end, facecolor="none", edgecolor=STALL_COLOR, hatch="\\\\",
                   alpha=0.7, lw=0, zorder=3.5, gid="stall")
    for rd in rounds:
        ax.axvline(rd.formed_at, color="#555555", lw=0.9, ls="--", zorder=1)
        ax.annotate(f"round {rd.round}: {rd.nodes} nodes", (rd.formed_at, 1), xycoords=top,
                    xytext=(2, 2), textcoords="offset points", fontsize=8, color="#333333",
                    va="bottom", annotation_clip=False)
    for f in faults:
        a, b = fault_extent(f, recoveries, end)
        ax.axvspan(a, b, color=FAULT_COLOR, alpha=0.14, lw=0, zorder=0.5)
        ax.axvline(a, color=FAULT_COLOR, lw=1.3, zorder=4)
        ax.annotate(f"{f.id} ({f.type} {f.target})", (a, 1), xycoords=top, xytext=(2, 13),
                    textcoords="offset points", fontsize=8.5, color=FAULT_COLOR,
                    fontweight="bold", va="bottom", annotation_clip=False)


def timeline_png(tls: Sequence[ProcessTimeline], faults: Sequence[FaultSpan],
                 rounds: Sequence[RoundInfo], recoveries: Sequence[Recovery], end: float,
                 title: str = "", max_rows: int = MAX_ROWS, stalls: Sequence[Stall] = ()
                 ) -> bytes:
    """:func:`timeline_figure` as PNG bytes."""
    return png_bytes(timeline_figure(tls, faults, rounds, recoveries, end, title, max_rows,
                                     stalls))


def timeline_figure(tls: Sequence[ProcessTimeline], faults: Sequence[FaultSpan],
                    rounds: Sequence[RoundInfo], recoveries: Sequence[Recovery], end: float,
                    title: str = "", max_rows: int = MAX_ROWS, stalls: Sequence[Stall] = ()
                    ) -> Figure:
    """The per-process timeline: rows by host, phase bands, collective ticks (failures
    marked), faults shaded with labels, round boundaries. Row ``i`` is drawn at y = i."""
    from matplotlib.collections import LineCollection

    rows = timeline_rows(tls, faults, max_rows)
    fig = new_figure(max(3.8, 1.9 + 0.3 * len(rows)))
    ax = fig.add_subplot()
    ticks: list[list[tuple[float, float]]] = []
    fails: list[tuple[float, float]] = []
    restores: list[tuple[float, float]] = []
    for y, row in enumerate(rows):
        if row.grouped:
            _draw_band(ax, row.procs, y, end, fails)
            continue
        tl = row.procs[0]
        for state in STATES:
            spans = [(s.start, s.duration) for s in (*tl.phases, *tl.overlays)
                     if s.state == state]
            if spans:
                ax.broken_barh(spans, (y - 0.34, 0.68), facecolors=COLORS[state],
                               hatch="////" if state == "stopped" else None,
                               edgecolor="white" if state == "stopped" else "none", lw=0)
        ticks += [[(c.end, y - 0.34), (c.end, y - 0.12)] for c in tl.collectives if not c.failed]
        fails += [(c.end, y) for c in tl.collectives if c.failed]
        restores += [(t, y + 0.22) for t in tl.restores]
        for t, code in tl.exits:
            if code != 0:
                ax.scatter([t], [y], marker="X", s=110, color=FAULT_COLOR, edgecolor="black",
                           lw=0.6, zorder=6)
                ax.annotate(f"exit {code}", (t, y), xytext=(7, -3), textcoords="offset points",
                            fontsize=8, color="white", fontweight="bold", zorder=6)
    if ticks:
        ax.add_collection(LineCollection(ticks, colors="#1b3a1b", linewidths=0.5, alpha=0.55,
                                         zorder=3))
    if fails:
        ax.scatter([x for x, _ in fails], [y for _, y in fails], marker="x", s=45,
                   color=FAULT_COLOR, lw=1.8, zorder=5)
    if restores:
        ax.scatter([x for x, _ in restores], [y for _, y in restores], marker="<", s=22,
                   color="#6a1b9a", zorder=5)
    _host_separators(ax, rows)
    _marks(ax, faults, rounds, recoveries, end, stalls)
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=8.5 if len(rows) < 24
                  else 7.5)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    ax.set_xlim(0, end * 1.005 if end > 0 else 1)
    ax.set_xlabel("run time (s)")
    ax.grid(axis="x", color="#e0e0e0", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(title or "Timeline", loc="left", fontsize=11, pad=30)
    _timeline_legend(fig, tls, bool(fails), bool(restores), any(r.grouped for r in rows),
                     bool(faults), bool(stalls))
    return fig


def _draw_band(ax: Axes, procs: list[ProcessTimeline], y: int, end: float,
               fails: list[tuple[float, float]]) -> None:
    """A group row: the fraction of its processes in each state along time, stacked."""
    import numpy as np

    mat = state_matrix(procs, end)
    xs = (np.arange(BINS) + 0.5) * (end / BINS)
    base = np.full(BINS, y + 0.4)
    for code, state in enumerate(STATES, start=1):
        frac = (mat == code).sum(axis=0) / len(procs)
        if frac.any():
            ax.fill_between(xs, base, base - 0.8 * frac, color=COLORS[state], lw=0,
                            step="mid")
            base = base - 0.8 * frac
    seen: set[int] = set()
    for tl in procs:
        for c in tl.collectives:
            b = int(c.end / end * 200) if end > 0 else 0
            if c.failed and b not in seen:
                seen.add(b)
                fails.append((c.end, y))


def stall_handle() -> Any:
    """A legend handle for stalls (a new artist each time: an artist has one figure)."""
    from matplotlib.patches import Rectangle

    return Rectangle((0, 0), 0, 0, facecolor="none", edgecolor=STALL_COLOR, hatch="\\\\",
                     label="stall (no progress)")


def _host_separators(ax: Axes, rows: Sequence[Row]) -> None:
    """A line between hosts when hosts hold several processes, else between every row."""
    for y in range(1, len(rows)):
        prev, cur = rows[y - 1].procs[-1], rows[y].procs[0]
        if prev.host != cur.host or rows[y].grouped != rows[y - 1].grouped:
            ax.axhline(y - 0.5, color="#cfcfcf", lw=0.6, zorder=0)


def _timeline_legend(fig: Figure, tls: Sequence[ProcessTimeline], fails: bool,
                     restores: bool, grouped: bool, faults: bool, stalls: bool = False
                     ) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    used = {s.state for tl in tls for s in (*tl.phases, *tl.overlays)}
    handles: list[Any] = [Patch(color=COLORS[s], label=s) for s in STATES if s in used]
    if not grouped:
        handles.append(Line2D([], [], color="#1b3a1b", lw=0.8, marker="|", ls="",
                              label="collective done"))
    if fails:
        handles.append(Line2D([], [], color=FAULT_COLOR, marker="x", ls="",
                              label="collective failed"))
    if restores:
        handles.append(Line2D([], [], color="#6a1b9a", marker="<", ls="",
                              label="restore to commit"))
    if any(code != 0 for tl in tls for _, code in tl.exits):
        handles.append(Line2D([], [], color=FAULT_COLOR, marker="X", ls="", label="crash"))
    if faults:
        handles.append(Patch(color=FAULT_COLOR, alpha=0.25, label="fault"))
    if stalls:
        handles.append(stall_handle())
    handles.append(Line2D([], [], color="#555555", ls="--", label="round formed"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 11),
               fontsize=8.5, frameon=False)


def world_size_png(tls: Sequence[ProcessTimeline], faults: Sequence[FaultSpan],
                   rounds: Sequence[RoundInfo], recoveries: Sequence[Recovery], end: float,
                   series: Sequence[tuple[float, int]], stalls: Sequence[Stall] = ()) -> bytes:
    """:func:`world_size_figure` as PNG bytes."""
    return png_bytes(world_size_figure(tls, faults, rounds, recoveries, end, series, stalls))


def world_size_figure(tls: Sequence[ProcessTimeline], faults: Sequence[FaultSpan],
                      rounds: Sequence[RoundInfo], recoveries: Sequence[Recovery], end: float,
                      series: Sequence[tuple[float, int]], stalls: Sequence[Stall] = ()
                      ) -> Figure:
    """World size of the current round over time, with the number of processes actually
    training underneath (it dips while the job recovers)."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    fig = new_figure(3.4)
    ax = fig.add_subplot()
    training = (state_matrix(tls, end) == STATES.index("training") + 1).sum(axis=0)
    xs = (np.arange(BINS) + 0.5) * (end / BINS)
    ax.fill_between(xs, 0, training, step="mid", color=COLORS["training"], alpha=0.35, lw=0,
                    label="processes training")
    if series:
        ts = [t for t, _ in series] + [end]
        ws = [w for _, w in series] + [series[-1][1]]
        ax.step(ts, ws, where="post", color="#1f3b73", lw=2.2,
                label="world size (processes, WORLD_SIZE)", gid="world_size")
        nodes = {r.formed_at: r.nodes for r in rounds}
        for t, w in series:
            label = f"W={w}" + (f" ({nodes[t]} nodes)" if nodes.get(t, w) != w else "")
            ax.annotate(label, (t, w), xytext=(4, 4), textcoords="offset points",
                        fontsize=9, fontweight="bold", color="#1f3b73")
    _marks(ax, faults, rounds, recoveries, end, stalls)
    if stalls:
        ax.add_patch(stall_handle())  # off-canvas: only for the legend entry
    peak = max([w for _, w in series] + [int(training.max()) if training.size else 0, 1])
    ax.set_ylim(0, peak * 1.2 + 0.5)
    ax.set_xlim(0, end * 1.005 if end > 0 else 1)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("processes")
    ax.set_xlabel("run time (s)")
    ax.grid(color="#e8e8e8", lw=0.6)
    ax.legend(loc="lower right", fontsize=8.5)
    ax.set_title("World size over time", loc="left", fontsize=11, pad=30)
    return fig


def recovery_axes(ax: Axes, labels: Sequence[str],
                  phases: Sequence[dict[str, float | None]], notes: Sequence[str]) -> None:
    """Horizontal stacked bars: per fault (or fault type), seconds in each recovery phase."""
    longest = max((sum(v or 0.0 for v in ph.values()) for ph in phases), default=0.0)
    for y, ph in enumerate(phases):
        left = 0.0
        for name, color in PHASE_COLORS.items():
            width = ph.get(name) or 0.0
            shown = y == 0 and any(p.get(name) for p in phases)
            ax.barh(y, width, left=left, color=color, height=0.6,
                    label=name.replace("_", " ") if shown else None)
            if width > 0.07 * longest:
                ax.text(left + width / 2, y, f"{width:.3f} s", ha="center", va="center",
                        fontsize=8, color="white", fontweight="bold")
            left += width
        ax.annotate(notes[y], (left, y), xytext=(5, 0), textcoords="offset points",
                    va="center", fontsize=8.5)
    ax.set_yticks(range(len(labels)), list(labels), fontsize=8.5)
    ax.set_ylim(len(labels) - 0.4, -0.6)
    ax.set_xlabel("seconds after the fault")
    ax.margins(x=0.18)
    ax.grid(axis="x", color="#e8e8e8", lw=0.6)
    ax.set_axisbelow(True)
    if ax.figure is not None:  # below the figure; only this axes' phases
        handles, labels = ax.get_legend_handles_labels()
        ax.figure.legend(handles, labels, loc="outside lower center", fontsize=8.5, ncol=4,
                         frameon=False)


def _note(r: Recovery) -> str:
    """What a fault cost, in words: its recovery, or the stall of one that needed none."""
    if r.recovery_s is not None:
        head = f"{r.recovery_s:.3f} s"
    elif r.needed_recovery:
        head = "not recovered"
    else:
        head = "no recovery needed" if r.stall_s <= 0 else f"stall {r.stall_s:.3f} s"
    return head + f", lost {r.lost_steps} steps"


def recovery_png(recoveries: Sequence[Recovery]) -> bytes | None:
    """The recovery breakdown per fault (detect, rendezvous, sync, first step), or None
    when no fault fired."""
    if not recoveries:
        return None
    fig = new_figure(1.9 + 0.45 * len(recoveries))
    ax = fig.add_subplot()
    notes = [_note(r) for r in recoveries]
    recovery_axes(ax, [f"{r.id} ({r.type} {r.target})" for r in recoveries],
                  [r.phases() | {"stall": r.stall_s} for r in recoveries], notes)
    ax.set_title("Recovery breakdown per fault", loc="left", fontsize=11)
    return png_bytes(fig)
