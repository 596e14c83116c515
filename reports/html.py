"""The run report as one self-contained HTML page (its frame and pieces:
:mod:`elastic_sim.reports.page`, shared with the campaign and compare pages)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from elastic_sim.reports.members import members_text
from elastic_sim.reports.metrics import PHASE_NAMES, lost_samples
from elastic_sim.reports.page import document, esc, img_tag, table
from elastic_sim.reports.view import RunView


def _num(x: float | None, unit: str = "s", digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f} {unit}".rstrip()


def _kv(pairs: Iterable[tuple[str, object]]) -> str:
    return table(("field", "value"), pairs)


def _mark(ok: bool) -> str:
    return '<span class="ok">✓</span>' if ok else '<span class="bad">✗</span>'


def render_html(view: RunView, images: Mapping[str, bytes | None]) -> str:
    """The whole report page of one run."""
    s = view.summary
    protocol = s.get("scenario", {}).get("protocol", {}).get("name", "?")
    verdict = str(s.get("verdict", "pass" if s.get("exit_code", 0) == 0 else "fail"))
    parts = [
        f"<h1>{esc(view.name)} <span class=\"badge {'pass' if verdict == 'pass' else 'fail'}\" "
        f"title=\"every check and expectation holds\">{esc(_verdict_text(verdict))}</span> "
        f"<span class=\"badge {'pass' if view.metrics.outcome == 'completed' else 'fail'}\" "
        f"title=\"how the job itself ended\">job {esc(view.metrics.outcome)}</span></h1>",
        f"<p class=\"muted\">protocol {esc(protocol)} · mode {esc(s.get('mode', '?'))}"
        f" · seed {esc(s.get('seed', '?'))} · {len(view.hosts)} hosts, "
        f"{len(view.timelines)} processes · {len(view.events)} trace events</p>",
        _facts(view),
        "<h2 id=\"timeline\">Timeline</h2>",
        img_tag(images.get("timeline"), "per-process timeline"),
        "<h2 id=\"world\">World size</h2>",
        img_tag(images.get("world_size"), "world size over time"),
        "<h2 id=\"faults\">Faults</h2>", _faults(view),
        img_tag(images.get("recovery"), "recovery breakdown per fault") if view.faults else "",
        "<h3 id=\"stalls\">Stalls</h3>", _stalls(view),
        "<h2 id=\"checks\">Checks</h2>", _checks(s.get("checks", [])),
        "<h2 id=\"expectations\">Expectations</h2>", _expectations(s.get("expectations", [])),
        "<h2 id=\"metrics\">Metrics</h2>", _metrics(view),
        "<h3>Rounds</h3>", _rounds(view),
        "<h2 id=\"scenario\">Scenario</h2>", _scenario(s.get("scenario", {})),
        _footer(s),
    ]
    return document(f"elastic-sim: {view.name}", "".join(parts))


def _verdict_text(verdict: str) -> str:
    """The verdict badge: whether the run held what it claims (a job that fails as the
    scenario expects passes; the job's own badge says it failed)."""
    return {"pass": "PASS: expectations met", "fail": "FAIL",
            "stopped": "STOPPED by a guard"}.get(verdict, verdict.upper())


def _facts(view: RunView) -> str:
    m, g = view.metrics, view.goodput
    worlds = " → ".join(str(r.processes) + (f" ({r.nodes} nodes)" if r.nodes != r.processes
                                            else "") for r in m.rounds) or "no round formed"
    facts = [
        ("outcome", m.outcome),
        ("world size (processes)", worlds),
        ("steps", f"{m.steps_done}"),
        ("goodput", f"{100 * g.ratio:.1f} %"),
        ("slowest recovery", _num(m.max_recovery_s)),
        ("lost steps", m.lost_steps),
        ("lost samples", m.lost_samples),
        *([("never done", f"{m.unfinished_steps} of {m.steps_total} steps")]
          if m.unfinished_steps else []),
        ("stalled", _num(m.stalled_s)),
        ("re-rendezvous", view.restarts.rendezvous),
        ("run time", _num(m.end_time)),
    ]
    cells = "".join(f'<div class="fact"><span>{esc(k)}</span><b>{esc(v)}</b></div>'
                    for k, v in facts)
    return f'<div class="facts" id="facts">{cells}</div>'


def _faults(view: RunView) -> str:
    recs = {r.id: r for r in view.metrics.recoveries}
    healed = {f.id: f.end for f in view.faults}
    scheduled = view.summary.get("faults") or [
        {"id": f.id, "type": f.type, "fired": True, "at": f.start, "reason": ""}
        for f in view.faults
    ]
    if not scheduled:
        return '<p class="muted">No fault was scheduled.</p>'
    rows = []
    for f in scheduled:
        rec = recs.get(str(f.get("id")))
        ph = rec.phases() if rec else {}
        rows.append((
            f.get("id"), f.get("type"), rec.target if rec else "",
            _num(f.get("at")) if f.get("fired") else "—",
            "yes" if f.get("fired") else f"no: {f.get('reason', '')}",
            _num(healed.get(str(f.get("id")))),
            *(_num(ph.get(k)) for k in PHASE_NAMES),
            _num(rec.recovery_s) if rec else "—",
            _num(rec.stall_s) if rec else "—",
            rec.lost_steps if rec else "—",
            lost_samples(rec, view.metrics.rounds, view.metrics.batch_size) if rec else "—",
            rec.seen if rec else "",
        ))
    head = ("fault", "type", "target", "at", "fired", "healed at", *PHASE_NAMES.values(),
            "recovery", "stalled", "lost steps", "lost samples", "seen as")
    return table(head, rows, numeric=range(6, 14))


def _stalls(view: RunView) -> str:
    """Every interval with live members and no training progress, and its cause."""
    rows = [(_num(st.start), _num(st.end), _num(st.duration), st.cause or "(no fault)",
             "recovery" if st.recovering else "stall") for st in view.metrics.stalls]
    if not rows:
        return '<p class="muted">Training never stood still.</p>'
    return table(("from", "to", "seconds", "blamed on", "during"), rows, numeric=range(0, 3))


def _checks(checks: Sequence[Mapping[str, Any]]) -> str:
    if not checks:
        return '<p class="muted">No check results in the summary.</p>'
    out = ["<table><tr><th></th><th>check</th><th>property</th><th>checked</th></tr>"]
    for c in checks:
        mark = ('<span class="muted">n/a</span>' if c.get("status") == "n/a"
                else _mark(bool(c.get("ok"))))
        out.append(f"<tr><td>{mark}</td><td>{esc(c.get('name'))}</td>"
                   f"<td>{esc(c.get('description'))}</td>"
                   f"<td>{esc(c.get('examined', c.get('checked', '')))}</td></tr>")
    out.append("</table>")
    for c in checks:
        for v in c.get("violations", []):
            out.append(f'<div class="violation"><b class="bad">{esc(c.get("name"))}</b>: '
                       f"{esc(v.get('message'))}")
            out.append(_witness(v.get("witness", [])))
            out.append("</div>")
    return "".join(out)


def _witness(events: Sequence[Mapping[str, Any]]) -> str:
    rows = [(f"{float(e.get('t', 0)):.6f}", e.get("host"), e.get("proc"), e.get("kind"),
             json.dumps(e.get("data", {}), sort_keys=True)) for e in events]
    return table(("t (s)", "host", "process", "kind", "data"), rows, numeric=(0,))


def _expectations(exps: Sequence[Mapping[str, Any]]) -> str:
    if not exps:
        return '<p class="muted">The scenario states no expectation.</p>'
    out = ["<table><tr><th></th><th>expectation</th><th>expected</th><th>actual</th></tr>"]
    for e in exps:
        out.append(f"<tr><td>{_mark(bool(e.get('ok')))}</td><td>{esc(e.get('name'))}</td>"
                   f"<td>{esc(e.get('expected'))}</td><td>{esc(e.get('actual'))}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _metrics(view: RunView) -> str:
    m, g, r = view.metrics, view.goodput, view.restarts
    return _kv([
        ("outcome", m.outcome),
        ("steps done", f"{m.steps_done} of {m.steps_total}"),
        ("world sizes (processes, WORLD_SIZE)", " → ".join(str(r.processes) for r in m.rounds)),
        ("world sizes (nodes)", " → ".join(str(r.nodes) for r in m.rounds)),
        ("world sizes (members, as the protocol counts them)",
         " → ".join(map(str, m.world_sizes))),
        ("goodput", f"{100 * g.ratio:.1f} % (useful {g.useful_s:.3f} s of {g.wall_s:.3f} s)"),
        ("step time lost to rollbacks", _num(g.wasted_s)),
        ("stalled (live members, no progress)", _num(g.stalled_s)),
        ("lost steps (all faults)", m.lost_steps),
        ("lost samples (all processes)", m.lost_samples),
        ("steps never done", m.unfinished_steps),
        ("slowest recovery", _num(m.max_recovery_s)),
        ("restarts", f"{r.rendezvous} re-rendezvous, {r.rollbacks} rollbacks, "
                     f"{r.processes} process restarts"),
        ("failed processes", ", ".join(f"{p} ({c})" for p, c in m.failed_procs.items()) or "—"),
        ("errors", "; ".join(m.errors[:5]) or "—"),
        ("run time", _num(m.end_time)),
    ])


def _rounds(view: RunView) -> str:
    rows = []
    for rd in view.metrics.rounds:
        ends = view.round_ends.get(rd.round, view.end)
        rows.append((rd.round, _num(rd.formed_at), _num(ends), _num(ends - rd.formed_at),
                     rd.nodes, rd.processes, rd.steps, _num(rd.first_step_at),
                     members_text(rd.members, rd.ranks)))
    if not rows:
        return '<p class="muted">No round was formed.</p>'
    return table(("round", "formed at", "ended at", "duration", "nodes", "processes", "steps",
                   "first step at", "members (=rank)"), rows, numeric=range(0, 8))


def _scenario(sc: Mapping[str, Any]) -> str:
    if not sc:
        return '<p class="muted">No scenario in the summary.</p>'
    proto = sc.get("protocol", {})
    out = [f"<pre>{esc(str(sc.get('description', '')).strip())}</pre>",
           _kv([("name", sc.get("name")), ("protocol", proto.get("name")),
                ("seed", sc.get("seed")), ("time limit", sc.get("time_limit"))])]
    for title, section in (("Knobs", proto.get("knobs", {})), ("Cluster", sc.get("cluster", {})),
                           ("Workload", sc.get("workload", {}))):
        if section:
            out.append(f"<h3>{esc(title)}</h3>")
            out.append(_kv((k, json.dumps(v) if isinstance(v, (list, dict)) else v)
                           for k, v in section.items()))
    for title, key in (("Fault schedule", "faults"), ("Expected", "expect")):
        if sc.get(key):
            out.append(f"<h3>{esc(title)}</h3><pre>{esc(json.dumps(sc[key], indent=1))}</pre>")
    return "".join(out)


def _footer(s: Mapping[str, Any]) -> str:
    trace = s.get("trace", {})
    return (f"<footer>Trace {esc(trace.get('file', 'trace.jsonl'))}, "
            f"{esc(trace.get('events', '?'))} events, sha256 <code>{esc(trace.get('sha256', '?'))}"
            "</code>. The same run as a Perfetto trace: trace.perfetto.json (open it in "
            "ui.perfetto.dev). Re-render with <code>elastic-sim report RUN_DIR</code>.</footer>")
