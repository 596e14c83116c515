"""What a study shows: the console summary, ``study.json``, the plot of goodput against
each varied setting (``goodput.png``) and ``study.html`` (on :mod:`elastic_sim.reports.page`'s
frame, like a campaign's page)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.reports.page import document, esc, img_tag, table
from elastic_sim.study.cache import model_version
from elastic_sim.study.outcome import CATEGORIES, Estimate, SettingResult
from elastic_sim.study.run import StudyResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console

STUDY_FILE = "study.html"


def pct(e: Estimate) -> str:
    """``91.3 % [90.9, 91.7]``."""
    return f"{100 * e.mean:.1f} % [{100 * e.low:.1f}, {100 * e.high:.1f}]"


def hours(e: Estimate) -> str:
    """``12.3 [11.0, 13.6]`` (hours)."""
    return f"{e.mean:,.2f} [{e.low:,.2f}, {e.high:,.2f}]"


def optimum(r: StudyResult) -> tuple[SettingResult, list[SettingResult]]:
    """The setting with the highest mean goodput, and the others whose interval overlaps
    its own (not told apart by these replications)."""
    best = max(r.results, key=lambda s: s.goodput.mean)
    g = best.goodput
    ties = [s for s in r.results if s is not best and s.goodput.high >= g.low]
    return best, ties


def headline(r: StudyResult) -> list[str]:
    """The lines every output starts with: what ran, how, from what."""
    st = r.study
    job = st.jobs[0]
    lines = [f"study {st.name}: {job.protocol}, {job.nodes:,} nodes x {job.gpus_per_node} GPUs, "
             f"{st.spec.horizon_days:g} days, {len(r.results)} setting(s)",
             f"failures: {st.process.describe()}; causes: "
             + ", ".join(f"{c.name} ({c.effect.kind}"
                         + (f", back after {c.effect.downtime:g} s" if c.effect.takes_host
                            and c.effect.returns else "")
                         + (", never back" if not c.effect.returns else "") + ")"
                         for c in st.causes)]
    if st.source:
        lines.append(f"source: {' '.join(st.source.split())}")
    lines.append(f"method: {r.method} ({r.why})")
    s = r.sampled
    if s is not None:
        sizes = sorted({n for b in s.books.values() for n in b.sizes})
        lines.append(f"recoveries: {s.ran + s.cached} samples of the faithful model at "
                     f"{', '.join(f'{n:,}' for n in sizes)} nodes ({s.ran} run, {s.cpu_s:,.0f} "
                     f"CPU s; {s.cached} from the cache, model {model_version()})")
        for label, book in s.books.items():
            if book.growths:
                lines.append(f"  {label}: sampled below the job's {book.nodes:,} nodes; each "
                             "phase extrapolated by its growth over the sampled sizes: "
                             + _growth_text(book.growths))
    return lines


def _growth_text(growths: dict[str, Any]) -> str:
    parts = []
    for kind, gs in growths.items():
        shown = ", ".join(f"{g.phase} ~ n^{g.exponent:.2f}" for g in gs
                          if g.phase in ("detect", "rendezvous", "restart") and g.medians)
        if shown:
            parts.append(f"{kind}: {shown}")
    return "; ".join(parts)


def print_study(r: StudyResult, console: Console) -> None:
    """The console summary."""

    def say(text: str = "") -> None:
        console.print(text, markup=False, highlight=False)

    for line in headline(r):
        say(line)
    say()
    width = max(len(s.label) for s in r.results)
    timed = any(s.completion() is not None for s in r.results)
    say(f"{'setting':<{width}}  {'goodput (95% CI)':<24} {'failures':>8} {'job deaths':>10}"
        + (f"  {'completion, min (95% CI)':<26}" if timed else "") + "  fate")
    for s in r.results:
        fates = ", ".join(f"{k} {v}" for k, v in sorted(s.fates().items()))
        c = s.completion()
        done = (f"{60 * c.mean:,.0f} [{60 * c.low:,.0f}, {60 * c.high:,.0f}]" if c is not None
                else "—")
        say(f"{s.label:<{width}}  {pct(s.goodput):<24} {_mean(s, 'failures'):>8.1f} "
            f"{_mean(s, 'job_failures'):>10.2f}" + (f"  {done:<26}" if timed else "")
            + f"  {fates}")
    for s in r.results:
        for note in s.notes:
            say(f"{s.label}: {note}")
    best, ties = optimum(r)
    if len(r.results) > 1:
        say(f"optimum: {best.label}: {pct(best.goodput)}"
            + (f" (not told apart from: {'; '.join(t.label for t in ties)})" if ties else ""))
    for s in r.results if len(r.results) <= 3 else [best]:
        say()
        say(f"lost time per cause, hours per run, mean [95% CI] ({s.label}, {s.method}):")
        lost = s.lost()
        cats = [c for c in ("start", *CATEGORIES) if any(c in d for d in lost.values())]
        for cause, per in sorted(lost.items(), key=lambda kv: -_total(kv[1])):
            say(f"  {cause}: total {_total(per):,.2f} h; "
                + ", ".join(f"{c} {hours(per[c])}" for c in cats if c in per))
        over = s.overhead()
        say(f"  checkpoint writes: {hours(over['checkpoint'])}")
        if over["step overhead"].mean > 0:
            say(f"  step overhead: {hours(over['step overhead'])}")
        say("recovery time per cause (failure to training again), seconds: "
            + "; ".join(f"{c} n={d['n']:.0f} median {d['median']:,.0f} p90 {d['p90']:,.0f} "
                        f"max {d['max']:,.0f}" for c, d in s.recovery().items()))
        if s.completion() is not None:
            say(f"completion: {hours(s.completion())} h")  # type: ignore[arg-type]
    ref = r.study.reference
    if ref is not None:
        say()
        say(reference_line(r, ref))


def reference_line(r: StudyResult, ref: Any) -> str:
    """The published figure beside this study's."""
    best = r.results[0]
    ours = "; ".join(f"{pct(s.goodput)} ({s.label})" for s in r.results)
    parts = []
    if ref.goodput_above is not None:
        parts.append(f"published: > {100 * ref.goodput_above:.0f} % effective training time; "
                     f"this study: {ours}")
    if ref.goodput is not None:
        parts.append(f"published: {100 * ref.goodput:.0f} % effective training time; "
                     f"this study: {ours}")
    if ref.completion_minutes is not None and best.completion() is not None:
        c = best.completion()
        assert c is not None
        parts.append(f"published: {ref.completion_minutes:,.0f} min to complete; this study: "
                     f"{60 * c.mean:,.0f} min [{60 * c.low:,.0f}, {60 * c.high:,.0f}]")
    for res in r.results:
        minutes = ref.completion_minutes_of.get(res.label)
        if minutes is None:
            continue
        c = res.completion()
        got = (f"{60 * c.mean:,.0f} min [{60 * c.low:,.0f}, {60 * c.high:,.0f}]"
               if c is not None else "did not complete")
        parts.append(f"{res.label}: published {minutes:,.0f} min, this study {got}")
    return "; ".join(parts) + (f" (source: {' '.join(ref.source.split())})" if ref.source else "")


def _mean(s: SettingResult, attr: str) -> float:
    runs = s.runs
    return sum(getattr(x, attr) for x in runs) / len(runs) if runs else 0.0


def _total(per: dict[str, Estimate]) -> float:
    return sum(e.mean for e in per.values())


# -- files --------------------------------------------------------------------------------

def study_json(r: StudyResult) -> dict[str, Any]:
    """Everything the study produced, as plain data."""
    best, ties = optimum(r)
    s = r.sampled
    return {
        "study": r.study.name, "file": r.study.file,
        "spec": r.study.spec.model_dump(mode="json"),
        "failures": r.study.process.describe(), "source": r.study.source,
        "method": r.method, "why": r.why, "model": model_version(),
        "settings": [x.to_json() for x in r.results],
        "optimum": {"label": best.label, "goodput": best.goodput.to_json(),
                    "not_told_apart": [t.label for t in ties]},
        "reference": r.study.reference.model_dump() if r.study.reference else None,
        "sampling": None if s is None else {
            "ran": s.ran, "cached": s.cached, "cpu_s": round(s.cpu_s, 3),
            "books": {label: {"nodes": b.nodes, "sizes": b.sizes,
                              "growth": {k: [{"phase": g.phase, "sizes": list(g.sizes),
                                              "medians": [round(v, 4) for v in g.medians],
                                              "exponent": round(g.exponent, 4)} for g in gs]
                                         for k, gs in b.growths.items()}}
                      for label, b in s.books.items()},
            "samples": [m.to_json() for m in s.measured],
        },
        "direct_cpu_s": round(r.direct_cpu_s, 3), "wall_s": round(r.wall_s, 3),
    }


def goodput_figure(r: StudyResult) -> Figure:
    """Goodput (with its interval) against each varied setting, one line per value of the
    others; a study that varies nothing: its goodput beside the published figure, and the
    time lost per cause (:func:`breakdown_figure`)."""
    varied = r.study.varied
    if not varied:
        return breakdown_figure(r)
    from elastic_sim.reports.plots import new_figure

    keys = list(varied)
    fig = new_figure(3.6)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    for ax, key in zip(axes, keys, strict=True):
        others = [k for k in keys if k != key]
        groups: dict[tuple[Any, ...], list[SettingResult]] = {}
        for s in r.results:
            if key in s.changes:
                groups.setdefault(tuple(s.changes.get(k) for k in others), []).append(s)
        values = varied[key]
        numeric = all(isinstance(v, (int, float)) for v in values)
        for group, members in groups.items():
            members.sort(key=lambda s: values.index(s.changes[key]))
            xs = [s.changes[key] if numeric else values.index(s.changes[key]) for s in members]
            g = [s.goodput for s in members]
            label = ", ".join(f"{k}={v}" for k, v in zip(others, group, strict=True)) or None
            ax.errorbar(xs, [100 * e.mean for e in g],
                        yerr=[[100 * (e.mean - e.low) for e in g],
                              [100 * (e.high - e.mean) for e in g]],
                        marker="o", capsize=3, label=label)
        if not numeric:
            ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(key)
        ax.set_ylabel("goodput (%), 95% CI")
        ax.grid(alpha=0.3)
        if len(groups) > 1:
            ax.legend(fontsize=8)
        ax.set_title(f"Goodput against {key}", loc="left", fontsize=11)
    return fig


def breakdown_figure(r: StudyResult) -> Figure:
    """One setting's goodput (with its interval, beside the published figure when the study
    names one) and its hours lost per cause, split by category."""
    from elastic_sim.reports.plots import new_figure

    s = r.results[0]
    fig = new_figure(3.8)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 3]})
    g = s.goodput
    left.bar([0], [100 * g.mean], yerr=[[100 * (g.mean - g.low)], [100 * (g.high - g.mean)]],
             capsize=4, color="#4c72b0")
    ref = r.study.reference
    published = None if ref is None else (ref.goodput_above if ref.goodput_above is not None
                                          else ref.goodput)
    if published is not None:
        left.axhline(100 * published, color="#c44e52", linestyle="--",
                     label=f"published {100 * published:.0f} %")
        left.legend(fontsize=8, loc="lower center")
    left.set_xticks([0], [s.label])
    left.set_ylim(max(0.0, 100 * min(g.low, published or g.low) - 10), 100)
    left.set_ylabel("goodput (%), 95% CI")
    left.set_title("Goodput", loc="left", fontsize=11)
    lost = sorted(s.lost().items(), key=lambda kv: -_total(kv[1]))[:12]
    cats = [c for c in ("start", *CATEGORIES) if any(c in d for _, d in lost)]
    names = [cause for cause, _ in lost][::-1]
    base = [0.0] * len(names)
    for cat in cats:
        widths = [dict(lost)[n][cat].mean if cat in dict(lost)[n] else 0.0 for n in names]
        if any(w > 0 for w in widths):
            right.barh(names, widths, left=base, label=cat)
            base = [b + w for b, w in zip(base, widths, strict=True)]
    right.set_xlabel("hours lost per run (mean)")
    right.tick_params(axis="y", labelsize=7)
    right.legend(fontsize=7, loc="lower right")
    right.grid(alpha=0.3, axis="x")
    right.set_title(f"Lost time per cause ({s.method})", loc="left", fontsize=11)
    return fig


def write_study(r: StudyResult, out: Path) -> list[Path]:
    """``study.json``, ``goodput.png`` and ``study.html`` into ``out``; the paths written,
    the page first."""
    from elastic_sim.pipeline import write_json
    from elastic_sim.reports.plots import png_bytes

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "study.json", study_json(r))
    png = png_bytes(goodput_figure(r))
    written = [out / STUDY_FILE, out / "study.json", out / "goodput.png"]
    _write(out / "goodput.png", png)
    _write(out / STUDY_FILE, render_html(r, png).encode("utf-8"))
    return written


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def render_html(r: StudyResult, png: bytes | None) -> str:
    """The study's page."""
    st = r.study
    best, ties = optimum(r)
    rows = [(s.label, s.method, pct(s.goodput), f"{_mean(s, 'failures'):.1f}",
             f"{_mean(s, 'job_failures'):.2f}",
             ", ".join(f"{k} {v}" for k, v in sorted(s.fates().items())))
            for s in r.results]
    parts = [f"<h1>Study: {esc(st.name)}</h1>",
             f"<p>{esc(st.spec.description)}</p>" if st.spec.description else "",
             "".join(f"<p>{esc(line)}</p>" for line in headline(r))]
    if st.reference is not None:
        ref = esc(reference_line(r, st.reference))
        parts.append(f'<div class="facts"><div class="fact"><b>{ref}</b><span>the published '
                     "figure beside this study's</span></div></div>")
    parts += ["<h2>Settings</h2>",
              table(("setting", "method", "goodput (95% CI)", "failures per run",
                     "job deaths per run", "fate"), rows, numeric=(3, 4))]
    if len(r.results) > 1:
        parts.append(f"<p>Optimum: <b>{esc(best.label)}</b>, {esc(pct(best.goodput))}"
                     + (f"; not told apart from: {esc('; '.join(t.label for t in ties))}"
                        if ties else "") + "</p>")
    if png is not None:
        parts.append(img_tag(png, "goodput against each varied setting" if st.varied
                             else "goodput and the time lost per cause"))
    for s in r.results:
        parts.append(f"<h2>Lost time: {esc(s.label)}</h2>")
        parts.append(_lost_table(s))
        parts.append("<h3>Recovery time per cause (s)</h3>")
        parts.append(table(("cause", "failures", "median", "p90", "max"),
                           [(c, f"{d['n']:.0f}", f"{d['median']:,.0f}", f"{d['p90']:,.0f}",
                             f"{d['max']:,.0f}") for c, d in s.recovery().items()],
                           numeric=(1, 2, 3, 4)))
        if s.notes:
            parts.append("".join(f'<p class="muted">{esc(n)}</p>' for n in s.notes))
    parts.append(_sampling_html(r))
    if st.spec.assumptions:
        parts.append("<h2>Assumptions</h2><ul>"
                     + "".join(f"<li>{esc(a)}</li>" for a in st.spec.assumptions) + "</ul>")
    parts.append(f"<footer>elastic-sim study, model {esc(model_version())}, "
                 f"{r.wall_s:,.0f} s</footer>")
    return document(f"elastic-sim study {st.name}", "".join(parts))


def _lost_table(s: SettingResult) -> str:
    lost = s.lost()
    cats = [c for c in ("start", *CATEGORIES) if any(c in d for d in lost.values())]
    rows = []
    for cause, per in sorted(lost.items(), key=lambda kv: -_total(kv[1])):
        rows.append((cause, f"{_total(per):,.2f}",
                     *(hours(per[c]) if c in per else "" for c in cats)))
    over = s.overhead()
    rows.append(("checkpoint writes", f"{over['checkpoint'].mean:,.2f}",
                 *("" for _ in cats)))
    if over["step overhead"].mean > 0:
        rows.append(("step overhead", f"{over['step overhead'].mean:,.2f}",
                     *("" for _ in cats)))
    return ('<p class="muted">Hours per run, mean [95% CI] over the replications.</p>'
            + table(("cause", "total", *cats), rows, numeric=range(1, 2 + len(cats))))


def _sampling_html(r: StudyResult) -> str:
    s = r.sampled
    if s is None:
        return (f"<h2>Direct simulation</h2><p>{esc(r.why)}; {r.direct_cpu_s:,.0f} CPU s of "
                "simulation.</p>")
    rows: list[Sequence[object]] = []
    for m in s.measured:
        rows.append((m.kind.label(), m.nodes, m.seed, _s(m.detect), _s(m.capacity),
                     _s(m.rendezvous), _s(m.restart), _s(m.died_after),
                     m.spent_failed, m.spent_others, f"{m.cpu_s:.2f}"))
    rows.sort(key=lambda row: (str(row[0]), int(str(row[1])), int(str(row[2]))))
    return ("<h2>Sampled recoveries</h2><p>Each row: one recovery simulated with the faithful "
            "model (seconds from the failure).</p>"
            + table(("kind", "nodes", "seed", "detect", "capacity", "rendezvous", "restart",
                     "died after", "restarts spent (failed host)", "(others)", "CPU s"),
                    rows, numeric=range(1, 11)))


def _s(v: float | None) -> str:
    return "" if v is None else f"{v:,.2f}"


def dumps(r: StudyResult) -> str:
    """``study.json``'s text (for tests)."""
    return json.dumps(study_json(r), indent=2)
