"""Plots: what is drawn where, and how the timeline scales to 256 hosts."""

from __future__ import annotations

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from elastic_sim.reports.plots import (
    COLORS,
    FAULT_COLOR,
    MAX_ROWS,
    recovery_png,
    timeline_figure,
    timeline_rows,
    world_size_figure,
)
from elastic_sim.reports.render import plot_images
from elastic_sim.reports.view import RunView, build_view
from tests.reports.synth import hung_run, static_run, summary_for

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def view4() -> RunView:
    events = static_run()
    return build_view(events, summary_for(events))


@pytest.fixture(scope="module")
def view256() -> RunView:
    events = static_run(hosts=256, crash_host="h3")
    return build_view(events, summary_for(events))


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def _pixels_near(fig: Figure, ax: Axes, x: float, y: float, dx: int = 0) -> list[tuple[int, ...]]:
    """RGB of the rendered pixels at data (x, y) and ``dx`` pixels either side."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    canvas.draw()  # type: ignore[no-untyped-call]
    buf = np.asarray(canvas.buffer_rgba())  # type: ignore[no-untyped-call]
    px, py = ax.transData.transform((x, y))
    row = buf.shape[0] - round(float(py))
    col = round(float(px))
    return [tuple(int(c) for c in buf[row, col + d, :3]) for d in range(-dx, dx + 1)]


def _close(a: tuple[int, ...], b: tuple[int, int, int], tol: int = 40) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_timeline_draws_the_fault_at_its_time_and_the_phases_in_their_colours(
    view4: RunView,
) -> None:
    m = view4.metrics
    fig = timeline_figure(view4.timelines, view4.faults, m.rounds, m.recoveries, view4.end)
    ax = fig.axes[0]
    # The crash line at t=2.55 crosses h0's row (y=0) ...
    assert any(_close(p, _rgb(FAULT_COLOR), 60) for p in _pixels_near(fig, ax, 2.55, 0, dx=1))
    # ... and nowhere else: at t=5 h0 trains (green), h3 (y=3) is down, and at t=3.2 the
    # survivors are in rendezvous.
    assert _close(_pixels_near(fig, ax, 5.0, 0.1)[0], _rgb(COLORS["training"]))
    assert _close(_pixels_near(fig, ax, 5.0, 3.1)[0], _rgb(COLORS["down"]))
    assert _close(_pixels_near(fig, ax, 3.2, 1.1)[0], _rgb(COLORS["rendezvous"]))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"h{i}/main r{i}" for i in range(4)]
    labels = [t.get_text() for t in ax.texts]
    assert "crash-h3 (crash h3)" in labels and "round 1: 3 nodes" in labels


def test_world_size_plot_steps_from_4_to_3(view4: RunView) -> None:
    m = view4.metrics
    fig = world_size_figure(view4.timelines, view4.faults, m.rounds, m.recoveries, view4.end,
                            view4.world_series)
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "world_size"]
    ys = list(line.get_ydata())  # type: ignore[arg-type]
    assert ys == [4, 3, 3]
    assert list(line.get_xdata())[:2] == [0.003, 3.708]  # type: ignore[arg-type]


def test_stalls_are_hatched_on_the_timeline_and_the_world_size_plot() -> None:
    """A hang that no reconfiguration followed: the job stood still with live members for
    the hang's length; both plots hatch exactly that interval."""
    events = hung_run()
    view = build_view(events, summary_for(events, steps=10))
    m = view.metrics
    (stall,) = m.stalls
    assert stall.cause == "freeze-h2" and not stall.recovering
    assert stall.duration == pytest.approx(2.0, abs=1e-6)
    for fig in (timeline_figure(view.timelines, view.faults, m.rounds, m.recoveries, view.end,
                                stalls=m.stalls),
                world_size_figure(view.timelines, view.faults, m.rounds, m.recoveries, view.end,
                                  view.world_series, m.stalls)):
        (patch,) = [p for p in fig.axes[0].patches if p.get_gid() == "stall"]
        x0, width = patch.get_x(), patch.get_width()  # type: ignore[attr-defined]
        assert (x0, x0 + width) == (pytest.approx(stall.start), pytest.approx(stall.end))
        legends = [*fig.legends, fig.axes[0].get_legend()]
        assert "stall (no progress)" in [t.get_text() for lg in legends if lg is not None
                                         for t in lg.get_texts()]
    png = recovery_png(m.recoveries)
    assert png is not None and png.startswith(PNG_MAGIC)


def test_recovery_breakdown_is_drawn_only_when_a_fault_fired(view4: RunView) -> None:
    assert recovery_png([]) is None
    png = recovery_png(view4.metrics.recoveries)
    assert png is not None and png.startswith(PNG_MAGIC)


def test_256_processes_are_aggregated_into_legible_rows_with_the_crashed_one_apart(
    view256: RunView,
) -> None:
    rows = timeline_rows(view256.timelines, view256.faults)
    assert len(rows) <= MAX_ROWS
    assert rows[0].label == "h3/main r3 *" and not rows[0].grouped
    grouped = [tl.proc for r in rows if r.grouped for tl in r.procs]
    assert grouped == [tl.proc for tl in view256.timelines]  # each process once, in order
    assert rows[1].label.startswith("h0/main .. ")


def test_plots_of_a_256_host_run_stay_a_page_high(view256: RunView) -> None:
    """(How fast they render is benchmarks/bench_plots.py's: no timed assertion here.)"""
    images = plot_images(view256)
    timeline = images["timeline"]
    assert timeline is not None and timeline.startswith(PNG_MAGIC)
    height = int.from_bytes(timeline[20:24], "big")  # IHDR: a page, not a poster
    assert 600 < height < 1800
