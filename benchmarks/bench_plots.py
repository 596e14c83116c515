"""Plots of a 256-host run: wall seconds to render the report's images (timeline, world
size, recovery), against the same plots of the 4-host run in the same process.

Target (issue 6): under 10 s for 256 hosts. The run is a synthetic static-protocol trace
(``tests/reports/synth.py``: every host trains, one crashes, the survivors re-form), so the
figure measures plotting, not simulation. Writes the 256-host images beside ``--out`` so
a person can check they stay legible.

    python benchmarks/bench_plots.py [--hosts 256] [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from elastic_sim.reports.render import plot_images  # noqa: E402
from elastic_sim.reports.view import RunView, build_view  # noqa: E402
from tests.reports.synth import static_run, summary_for  # noqa: E402


def view(hosts: int) -> RunView:
    """The view of a synthetic run of ``hosts`` hosts, h3 crashing."""
    events = static_run(hosts=hosts, crash_host="h3")
    return build_view(events, summary_for(events))


def render_s(v: RunView, repeat: int) -> tuple[float, dict[str, bytes | None]]:
    """Median wall seconds of rendering every plot of ``v``, and the images."""
    times, images = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        images = plot_images(v)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), images


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_plots")
    args = p.parse_args()
    render_s(view(4), 1)  # warm matplotlib's font cache and imports
    base, _ = render_s(view(4), args.repeat)
    big, images = render_s(view(args.hosts), args.repeat)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, png in images.items():
        if png is not None:
            (args.out / f"{name}_{args.hosts}.png").write_bytes(png)
    print(f"4 hosts (baseline): {base:.2f} s; {args.hosts} hosts: {big:.2f} s "
          f"({big / base:.1f}x the baseline; median of {args.repeat})")
    verdict = "MET" if big < 10 else "NOT MET"
    print(f"{args.hosts} hosts under 10 s: {verdict}; images in {args.out}")
    return 0 if big < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
