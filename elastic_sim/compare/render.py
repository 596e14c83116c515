"""A comparison as a console table, compare.json and compare.html (one timeline per mode,
stacked on one time axis)."""

from __future__ import annotations

import json
import os
from html import escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table

from elastic_sim.compare.collect import PHASES, Comparison, ModeSummary
from elastic_sim.reports.members import members_text
from elastic_sim.reports.page import document, table

COLORS = ("#1976d2", "#388e3c", "#f57c00", "#7b1fa2", "#00838f", "#c2185b")


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _seq(s: ModeSummary) -> str:
    return " -> ".join(f"{len(m)}[{members_text(m, {})}]" for m in s.membership) \
        or "(no round)"


MODE_COLUMNS = ("mode", "runs", "membership per round", "outcome", "lost steps",
                "stalled (s)", "job end (s)")
FAULT_COLUMNS = ("fault", "mode", "recovery", *(name for _, name in PHASES), "stalled",
                 "lost steps", "vs reference")


def _mode_row(c: Comparison, m: str) -> tuple[str, ...]:
    s = c.summaries[m]
    return (m, str(len(s.runs)), _seq(s), "/".join(sorted(set(s.outcomes))), _s(s.lost_steps),
            _s(s.stalled_s), _s(s.end_s))


def _fault_row(c: Comparison, f: str, m: str) -> tuple[str, ...]:
    ref = c.summaries[c.reference].recoveries.get(f, {}).get("recovery_s")
    rec = c.summaries[m].recoveries.get(f, {})
    got = rec.get("recovery_s")
    rel = ("—" if m == c.reference or ref is None or got is None or not ref
           else f"{100 * (got - ref) / ref:+.0f}%")
    return (f, m, _s(got), *(_s(rec.get(k)) for k, _ in PHASES), _s(rec.get("stall_s")),
            _s(rec.get("lost_steps")), rel)


def print_comparison(c: Comparison, console: Console) -> None:
    """The table a person reads: one row per mode, per fault."""
    console.print(f"elastic-sim compare {c.scenario}: modes {', '.join(c.modes)} "
                  f"(reference {c.reference}, tolerance ±{100 * c.tolerance:.0f}% and "
                  f"{c.slack:g} s)", markup=False)
    t = Table(box=None, pad_edge=False)
    for col in MODE_COLUMNS:
        t.add_column(col)
    for m in c.modes:
        t.add_row(*(markup_escape(cell) for cell in _mode_row(c, m)))
    console.print(t)
    faults = sorted({f for s in c.summaries.values() for f in s.recoveries})
    if faults:
        r = Table(title="Recovery per fault (s, medians)", title_justify="left", box=None,
                  pad_edge=False)
        for col in FAULT_COLUMNS:
            r.add_column(col)
        for f in faults:
            for m in c.modes:
                r.add_row(*_fault_row(c, f, m))
        console.print(r)
    checks = Table(title="Checks", title_justify="left", box=None, pad_edge=False)
    checks.add_column("check")
    for m in c.modes:
        checks.add_column(m)
    names = sorted({n for s in c.summaries.values() for n in s.checks})
    for n in names:
        checks.add_row(n, *(c.summaries[m].checks.get(n, "—").split(":")[0] for m in c.modes))
    console.print(checks)
    for d in c.disagreements:
        console.print(f"DISAGREE {d}", markup=False, style="red")
    for h in c.hints:
        console.print(h, markup=False, style="yellow")
    console.print("AGREE" if c.agree else "DISAGREE (exit 1)",
                  style="bold green" if c.agree else "bold red")


def write_outputs(c: Comparison, out: Path, extra: dict[str, Any]) -> list[Path]:
    """compare.json and compare.html, each written whole (temporary name, then rename)."""
    doc = {**c.to_json(), **extra}
    paths = [out / "compare.json", out / "compare.html"]
    texts = [json.dumps(doc, indent=1) + "\n", html(c, extra)]
    for path, text in zip(paths, texts, strict=True):
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return paths


def _timeline(s: ModeSummary, horizon: float) -> str:
    """One mode's first run: a row per host, a bar per round it was in, fault lines."""
    runs = [r for r in s.runs if r.timeline]
    if not runs:
        return f"<p>{escape(s.mode)}: no run to show.</p>"
    tl = runs[0].timeline
    hosts = list(tl["hosts"])
    width, left, row = 900, 60, 18
    scale = (width - left - 10) / max(horizon, 1e-9)
    height = row * len(hosts) + 30
    parts = [f'<svg width="{width}" height="{height}" role="img">']
    for i, h in enumerate(hosts):
        y = 10 + i * row
        parts.append(f'<text x="0" y="{y + 12}" font-size="12">{escape(h)}</text>')
    for k, rd in enumerate(tl["rounds"]):
        x0 = left + rd["formed_at"] * scale
        x1 = left + (rd["end"] if rd["end"] is not None else tl["end"]) * scale
        color = COLORS[k % len(COLORS)]
        for h in rd["members"]:
            if h in hosts:
                y = 10 + hosts.index(h) * row
                parts.append(f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 1):.1f}" '
                             f'height="{row - 4}" fill="{color}" opacity="0.75"><title>round '
                             f'{rd["round"]} ({len(rd["members"])} hosts) from '
                             f'{rd["formed_at"]:.2f} s</title></rect>')
        if rd["first_step_at"] is not None:
            x = left + rd["first_step_at"] * scale
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="5" y2="{height - 20}" '
                         'stroke="#000" stroke-dasharray="2,2"/>')
    for f in tl["faults"]:
        x = left + f["at"] * scale
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height - 20}" '
                     f'stroke="#c62828" stroke-width="2"><title>{escape(f["id"])} '
                     f'({escape(f["type"])}) at {f["at"]:.2f} s</title></line>')
    for sec in range(0, int(horizon) + 1, max(1, int(horizon) // 10 or 1)):
        x = left + sec * scale
        parts.append(f'<text x="{x:.1f}" y="{height - 5}" font-size="10">{sec}s</text>')
    parts.append("</svg>")
    return "".join(parts)


def html(c: Comparison, extra: dict[str, Any]) -> str:
    """One self-contained page, in report.html's look: verdict, tables, the timelines
    stacked."""
    horizon = max([float(r.timeline.get("end") or 0) for s in c.summaries.values()
                   for r in s.runs if r.timeline] or [1.0])
    faults = sorted({f for s in c.summaries.values() for f in s.recoveries})
    names = sorted({n for s in c.summaries.values() for n in s.checks})
    check_rows = [(n, *(c.summaries[m].checks.get(n, "—") for m in c.modes)) for n in names]
    timelines = "".join(f"<h3>{escape(m)}</h3>{_timeline(c.summaries[m], horizon)}"
                        for m in c.modes)
    badge = (f'<span class="badge {"pass" if c.agree else "fail"}">'
             f'{"AGREE" if c.agree else "DISAGREE"}</span>')
    problems = "".join(f'<div class="violation">{escape(d)}</div>' for d in c.disagreements)
    hints = "".join(f'<p class="muted">{escape(h)}</p>' for h in c.hints)
    load = extra.get("load")
    body = "".join([
        f"<h1>{escape(c.scenario)}: {escape(', '.join(c.modes))} {badge}</h1>",
        f'<p class="muted">Reference {escape(c.reference)}; a time agrees within '
        f"±{100 * c.tolerance:.0f}% and {c.slack:g} s, lost steps within "
        f"±{100 * c.tolerance:.0f}% and one step."
        f"{escape(f' Load average before/after: {load}.') if load else ''}</p>",
        problems, hints,
        "<h2>Membership and outcome</h2>",
        table(MODE_COLUMNS, [_mode_row(c, m) for m in c.modes], numeric=(1, 4, 5, 6)),
        "<h2>Recovery per fault (s, medians)</h2>",
        table(FAULT_COLUMNS, [_fault_row(c, f, m) for f in faults for m in c.modes],
              numeric=range(2, 9)) if faults else '<p class="muted">No fault fired.</p>',
        "<h2>Checks</h2>",
        table(("check", *c.modes), check_rows),
        "<h2>Timelines</h2><p class=\"muted\">First run of each mode; bars: rounds per host, "
        "red: faults, dashed: first step of a round.</p>", timelines,
    ])
    return document(f"compare {c.scenario}", body)
