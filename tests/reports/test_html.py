"""report.html: one self-contained page that shows the run, and keeps trace text inert."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from elastic_sim.reports.html import render_html
from elastic_sim.reports.view import build_view
from elastic_sim.trace import TraceEvent, encode
from tests.reports.synth import hung_run, static_run, summary_for

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _evil_run() -> tuple[list[TraceEvent], dict[str, Any]]:
    """A run whose trace and summary carry markup in every field a page shows."""
    events = [
        replace(ev, data={**ev.data, "id": EVIL}) if ev.kind == "fault" else ev
        for ev in static_run()
    ]
    events.append(TraceEvent(1.0, "h1", "h1/main", "job_failed", {"error": EVIL}))
    events.sort(key=lambda ev: ev.t)
    witness = [json.loads(encode(events[5]))]
    witness[0]["data"]["digest"] = EVIL
    summary = summary_for(
        events,
        verdict="fail",
        faults=[{"id": EVIL, "type": "crash", "fired": True, "at": 2.55, "reason": ""}],
        checks=[{"name": "state_agreement", "description": EVIL, "ok": False, "checked": 1,
                 "violations": [{"message": EVIL, "witness": witness}]}],
        expectations=[{"name": "outcome", "expected": EVIL, "actual": "failed", "ok": False}],
    )
    summary["scenario"]["description"] = EVIL
    summary["scenario"]["protocol"]["knobs"] = {EVIL: EVIL}
    return events, summary


def test_markup_from_the_trace_renders_inert() -> None:
    events, summary = _evil_run()
    page = render_html(build_view(events, summary), {"timeline": b"\x89PNG"})
    assert "<script" not in page.lower()
    assert "<img src=x" not in page
    assert not re.search(r"<img(?![^>]*src=\"data:image/png;base64,)", page)
    # fault id, check description, violation, witness, expectation, description, knobs,
    # error: every one shown, escaped
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 8


def test_the_page_is_self_contained() -> None:
    events = static_run()
    page = render_html(build_view(events, summary_for(events)),
                       {"timeline": b"\x89PNG-1", "world_size": b"\x89PNG-2", "recovery": None})
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert page.count('src="data:image/png;base64,') == 2


def test_the_page_shows_verdicts_faults_world_sizes_and_rounds() -> None:
    events, summary = _evil_run()
    page = render_html(build_view(events, summary), {})
    assert '>FAIL</span>' in page and 'class="badge fail"' in page
    assert "4 → 3" in page  # world sizes
    assert '<span class="bad">✗</span></td><td>state_agreement' in page
    assert "h0=0 h1=1 h2=2 h3=3" in page and "h0=0 h1=1 h2=2<" in page  # rounds, ranks
    assert "2.708 s" in page  # round 0 ended when the survivors left it
    assert "0.158 s" in page and "1.000 s" in page  # detect, rendezvous


def test_the_page_lists_each_stall_with_the_fault_it_is_blamed_on() -> None:
    events = hung_run()
    page = render_html(build_view(events, summary_for(events, steps=10)), {})
    section = page[page.index('id="stalls"'):page.index('id="checks"')]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", section)
    # h2 froze at 0.45 s, after step 4 (0.408 s): step 5 was due at 0.508 s, came at 2.508.
    assert cells == ["0.508 s", "2.508 s", "2.000 s", "freeze-h2", "stall"]
    facts = page[page.index('id="facts"'):page.index('id="timeline"')]
    assert re.search(r"<span>stalled</span><b>2.000 s</b>", facts)


def test_a_check_that_examined_nothing_shows_as_not_applicable() -> None:
    events = static_run()
    checks = [{"name": "master_agreement", "description": "d", "ok": True, "status": "n/a",
               "checked": 0, "examined": "nothing to check", "violations": []},
              {"name": "rank_validity", "description": "d", "ok": True, "status": "pass",
               "checked": 2, "examined": "2 rounds checked", "violations": []}]
    page = render_html(build_view(events, summary_for(events, checks=checks)), {})
    na = page[page.index("master_agreement") - 80:page.index("master_agreement")]
    ok = page[page.index("rank_validity") - 80:page.index("rank_validity")]
    assert "n/a" in na and "✓" not in na
    assert "n/a" not in ok and "nothing to check" in page and "2 rounds checked" in page
