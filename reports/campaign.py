"""The report of many runs (seeds of one scenario, or the runs of an explore session):
how recovery times are distributed, which violations were found, and which protocol states
and transitions the runs reached (coverage). A campaign is a directory tree: every folder
that holds a ``summary.json`` is one run; an explore session's folder also holds its
``explore.json``, whose coverage (mechanisms and abstract states over the search, faults
fired and never fired, values never reached, the stopping hint) the page plots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.reports.page import document, esc, img_tag, table
from elastic_sim.reports.spans import timelines
from elastic_sim.reports.view import read_summary
from elastic_sim.trace import read_trace
from elastic_sim.trace_kinds import EVENT_KINDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CAMPAIGN_FILE = "campaign.html"
EXPLORE_FILE = "explore.json"


@dataclass
class RunRecord:
    """What a campaign keeps of one run."""

    dir: Path
    name: str
    seed: object
    verdict: str
    outcome: str
    recoveries: list[dict[str, Any]]
    """summary.json's metrics.recoveries."""
    violations: list[tuple[str, str]]
    """(check, message) of every violation."""
    unmet: list[tuple[str, str, str]]
    """(expectation, expected, actual) of every unmet expectation."""
    expected: frozenset[str] = frozenset()
    """Checks the scenario says fail on purpose (``expect.violated_checks``)."""
    states: set[str] = field(default_factory=set)
    transitions: set[tuple[str, str]] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def find_runs(root: Path) -> list[Path]:
    """Every run directory under ``root`` (a folder with a summary.json), sorted."""
    return sorted(p.parent for p in root.rglob("summary.json"))


def load_run(run_dir: Path) -> RunRecord:
    """Read one run's summary and, when present, its trace (for coverage)."""
    s = read_summary(run_dir / "summary.json")
    rec = RunRecord(
        dir=run_dir,
        name=str(s.get("scenario", {}).get("name", run_dir.name)),
        seed=s.get("seed"),
        verdict=str(s.get("verdict", "?")),
        outcome=str(s.get("metrics", {}).get("outcome", "?")),
        recoveries=list(s.get("metrics", {}).get("recoveries", [])),
        violations=[(str(c.get("name")), str(v.get("message")))
                     for c in s.get("checks", []) for v in c.get("violations", [])],
        unmet=[(str(e.get("name")), str(e.get("expected")), str(e.get("actual")))
               for e in s.get("expectations", []) if not e.get("ok")],
        expected=frozenset(s.get("scenario", {}).get("expect", {}).get("violated_checks")
                           or ()),
    )
    trace = run_dir / "trace.jsonl"
    if trace.is_file():
        events = read_trace(trace)
        rec.kinds = {ev.kind for ev in events}
        for tl in timelines(events):
            rec.states.update(tl.path)
            rec.transitions.update(tl.transitions())
    return rec


def vocabulary() -> list[str]:
    """The event kinds the trace format defines (:data:`elastic_sim.trace_kinds.EVENT_KINDS`),
    so coverage can name the kinds no run reached."""
    return [k.kind for k in EVENT_KINDS]


@dataclass
class Campaign:
    """Many runs, summarised."""

    runs: list[RunRecord]

    def recovery_times(self) -> dict[str, list[float]]:
        """Recovery seconds of every recovered fault, by fault type."""
        out: dict[str, list[float]] = {}
        for run in self.runs:
            for r in run.recoveries:
                if r.get("recovery_s") is not None:
                    out.setdefault(str(r.get("type")), []).append(float(r["recovery_s"]))
        return out

    def unrecovered(self) -> Counter[str]:
        """Faults that needed a recovery (a survivor saw them) and whose job never trained
        again, by fault type; a fault nobody saw needed none."""
        return Counter(str(r.get("type")) for run in self.runs for r in run.recoveries
                       if r.get("recovery_s") is None
                       and r.get("phases", {}).get("detect") is not None)

    def mean_phases(self) -> dict[str, dict[str, float | None]]:
        """Mean seconds in each recovery phase, by fault type (recovered faults only)."""
        sums: dict[str, dict[str, float]] = {}
        counts: Counter[str] = Counter()
        for run in self.runs:
            for r in run.recoveries:
                if r.get("recovery_s") is None:
                    continue
                kind = str(r.get("type"))
                counts[kind] += 1
                acc = sums.setdefault(kind, {})
                for name, v in r.get("phases", {}).items():
                    acc[name] = acc.get(name, 0.0) + float(v or 0.0)
        return {k: {n: v / counts[k] for n, v in acc.items()} for k, acc in sums.items()}

    def coverage(self) -> tuple[Counter[str], Counter[tuple[str, str]], Counter[str]]:
        """How many runs reached each protocol state, each transition, each event kind."""
        states: Counter[str] = Counter()
        transitions: Counter[tuple[str, str]] = Counter()
        kinds: Counter[str] = Counter()
        for run in self.runs:
            states.update(run.states)
            transitions.update(run.transitions)
            kinds.update(run.kinds)
        return states, transitions, kinds


def _quantile(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def campaign_png(c: Campaign) -> bytes | None:
    """:func:`campaign_figure` as PNG bytes (None: no fault recovered)."""
    from elastic_sim.reports.plots import png_bytes

    fig = campaign_figure(c)
    return None if fig is None else png_bytes(fig)


def campaign_figure(c: Campaign) -> Figure | None:
    """Distribution of recovery times, and the mean breakdown per fault type."""
    times = c.recovery_times()
    if not times:
        return None
    from elastic_sim.reports.plots import new_figure, recovery_axes

    phases = c.mean_phases()
    fig = new_figure(max(3.6, 1.9 + 0.45 * len(phases)))
    hist, bars = fig.subplots(1, 2, width_ratios=[1, 1.2])
    palette = ["#455a64", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    hist.hist(list(times.values()), bins=20, stacked=True, label=list(times),
              color=palette[: len(times)] if len(times) <= len(palette) else None)
    hist.set_xlabel("recovery time (s): fault to first step of the new world")
    hist.set_ylabel("faults")
    from matplotlib.ticker import MaxNLocator

    hist.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: whole numbers
    hist.legend(fontsize=8.5)
    hist.set_title("Recovery time distribution", loc="left", fontsize=11)
    kinds = sorted(phases)
    notes = [f"mean of {len(times[k])}" for k in kinds]
    recovery_axes(bars, kinds, [phases[k] for k in kinds], notes)
    bars.set_title("Mean recovery breakdown by fault type", loc="left", fontsize=11)
    return fig


def _runs_table(c: Campaign, base: Path | None) -> str:
    """Every run, its directory linked to its report (report.html, else summary.json),
    relative to ``base`` (the page's folder) when given."""
    import os

    rows = []
    for r in c.runs:
        page = r.dir / "report.html"
        target = page if page.is_file() else r.dir / "summary.json"
        href = os.path.relpath(target, base) if base is not None else str(target)
        cells = [f'<a href="{esc(href)}">{esc(str(r.dir))}</a>',
                 *(esc(v) for v in (r.name, r.seed, r.verdict, r.outcome, len(r.recoveries)))]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("run", "scenario", "seed", "verdict", "outcome",
                                             "faults"))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def search_of(root: Path) -> dict[str, Any] | None:
    """The explore session whose folder ``root`` is (its ``explore.json``), if it is one."""
    import json

    path = root / EXPLORE_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) and "coverage" in data else None


def coverage_figure(search: dict[str, Any]) -> Figure | None:
    """Distinct mechanisms and abstract states reached as the search's cases went (None:
    too few points to draw)."""
    curve = search["coverage"].get("curve") or []
    if len(curve) < 2:
        return None
    from elastic_sim.reports.plots import new_figure

    fig = new_figure(3.2)
    ax = fig.subplots()
    cases = [p[0] for p in curve]
    ax.step(cases, [p[2] for p in curve], where="post", color="#d62728", label="mechanisms")
    ax.set_xlabel("cases judged")
    ax.set_ylabel("distinct mechanisms")
    states = ax.twinx()
    states.plot(cases, [p[3] for p in curve], color="#1f77b4", label="abstract states")
    states.set_ylabel("abstract states reached")
    lines = ax.get_lines() + states.get_lines()
    ax.legend(lines, [str(ln.get_label()) for ln in lines], fontsize=8.5, loc="lower right")
    ax.set_title("What the search reached, case by case", loc="left", fontsize=11)
    return fig


def _search_section(search: dict[str, Any], png: bytes | None) -> str:
    """The explore session's coverage: the curve, the hint, faults fired and not, values
    never reached."""
    cov = search["coverage"]
    fired, never = cov.get("faults_fired", {}), cov.get("faults_never_fired", {})
    rows = [(t, ", ".join(fired.get(t, [])) or "—", ", ".join(never.get(t, [])) or "—")
            for t in sorted(set(fired) | set(never))]
    mech = search.get("mechanisms", {})
    return "".join([
        f"<h2>Search coverage</h2><p>{search.get('cases', 0)} cases; "
        f"{mech.get('total', 0)} mechanisms ({mech.get('new', 0)} new, "
        f"{mech.get('known', 0)} known); {cov.get('states', 0)} abstract states and "
        f"{cov.get('transitions', 0)} transitions reached. {esc(cov.get('stopping_hint', ''))}"
        "</p>",
        img_tag(png, "mechanisms and states over the search"),
        "<h3>Faults fired</h3>",
        table(("fault type", "fired at", "never fired at"), rows),
        "<h3>Never reached</h3>",
        f"<p>{esc(', '.join(cov.get('never_reached', [])) or 'none')}</p>",
    ])


def render_campaign_html(c: Campaign, png: bytes | None, base: Path | None = None,
                         search: dict[str, Any] | None = None,
                         search_png: bytes | None = None) -> str:
    """The campaign page: runs (linked to their reports, relative to ``base``), recovery
    distribution, new and expected violations, coverage (with ``search``, an explore
    session's, plotted by ``search_png``)."""
    passed = sum(r.verdict == "pass" for r in c.runs)
    times, unrec = c.recovery_times(), c.unrecovered()
    dist = [(k, len(v), f"{_quantile(v, 0.5):.3f}", f"{_quantile(v, 0.9):.3f}",
             f"{max(v):.3f}", unrec.get(k, 0)) for k, v in sorted(times.items())]
    dist += [(k, 0, "—", "—", "—", n) for k, n in sorted(unrec.items()) if k not in times]
    violations = [(str(r.dir), r.seed, check, msg) for r in c.runs for check, msg in r.violations
                  if check not in r.expected]
    expected = [(str(r.dir), r.seed, check, msg) for r in c.runs
                for check, msg in r.violations if check in r.expected]
    unmet = [(str(r.dir), r.seed, *u) for r in c.runs for u in r.unmet]
    states, transitions, kinds = c.coverage()
    vocab = vocabulary()
    n = len(c.runs)
    return document("elastic-sim campaign", "".join([
        f"<h1>Campaign: {n} runs</h1><p>{passed} passed, {n - passed} failed; scenarios: "
        f"{esc(', '.join(sorted({r.name for r in c.runs})))}</p>",
        "<h2>Recovery times</h2>", img_tag(png, "recovery time distribution"),
        table(("fault type", "recovered", "p50 (s)", "p90 (s)", "max (s)", "not recovered"),
               dist, numeric=range(1, 6)),
        f"<h2>New violations ({len(violations)})</h2>",
        table(("run", "seed", "check", "violation"), violations) if violations
        else "<p class=\"muted\">None.</p>",
        f"<h2>Expected violations ({len(expected)})</h2><p class=\"muted\">Checks the "
        "scenario lists in expect.violated_checks: the modelled system's known bugs.</p>",
        table(("run", "seed", "check", "violation"), expected) if expected
        else "<p class=\"muted\">None.</p>",
        f"<h2>Unmet expectations ({len(unmet)})</h2>",
        table(("run", "seed", "expectation", "expected", "actual"), unmet) if unmet
        else "<p class=\"muted\">None.</p>",
        _search_section(search, search_png) if search is not None else "",
        "<h2>Coverage</h2><h3>Protocol states reached</h3>",
        table(("state", "runs"), states.most_common(), numeric=(1,)),
        "<h3>Transitions taken</h3>",
        table(("from", "to", "runs"), [(a, b, k) for (a, b), k in transitions.most_common()],
              numeric=(2,)),
        "<h3>Trace event kinds</h3>",
        f"<p>Never reached: {esc(', '.join(k for k in vocab if not kinds.get(k)) or 'none')}"
        "</p>",
        table(("kind", "runs"), [(k, kinds.get(k, 0)) for k in vocab]
               + [(k, v) for k, v in sorted(kinds.items()) if k not in vocab], numeric=(1,)),
        "<h2>Runs</h2>", _runs_table(c, base),
    ]))


def write_campaign_report(run_dirs: Sequence[Path], out_dir: Path) -> list[Path]:
    """Write ``campaign.html`` (and ``campaign_recovery.png``) for these runs into
    ``out_dir``; return the paths written, the HTML first."""
    from elastic_sim.reports.plots import png_bytes

    c = Campaign([load_run(d) for d in run_dirs])
    png = campaign_png(c)
    search = search_of(out_dir)
    fig = coverage_figure(search) if search is not None else None
    search_png = png_bytes(fig) if fig is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / CAMPAIGN_FILE
    page.write_text(render_campaign_html(c, png, out_dir, search, search_png),
                    encoding="utf-8")
    written = [page]
    for name, data in (("campaign_recovery.png", png), ("campaign_coverage.png", search_png)):
        if data is not None:
            (out_dir / name).write_bytes(data)
            written.append(out_dir / name)
    return written
