"""What every page of elastic-sim looks like (a run's report.html, a campaign's
campaign.html, a comparison's compare.html): one style sheet, one document frame and the
pieces they share. Self-contained: no script, no external font, image or style sheet, so a
page opens offline and anywhere; every string from a trace or a summary goes through
:func:`esc`, plots are embedded as base64 PNG data URIs."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;
background:#f6f7f9}
main{max-width:1440px;margin:0 auto;padding:18px 24px 48px}
h1{font-size:22px;margin:4px 0 6px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#dcdfe4;padding-bottom:4px}h3{font-size:14px;margin:14px 0 6px}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;font-weight:700;
font-size:13px;vertical-align:middle}.pass{background:#2e7d32}.fail{background:#c62828}
.facts{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}.fact{background:#fff;border:1px solid
#dcdfe4;border-radius:6px;padding:6px 10px}.fact b{display:block;font-size:16px}
.fact span{color:#5f6368;font-size:12px}
table{border-collapse:collapse;background:#fff;margin:4px 0 10px}td,th{border:1px solid #dcdfe4;
padding:3px 8px;text-align:left;vertical-align:top}th{background:#eef0f3;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#2e7d32;font-weight:700}.bad{color:#c62828;font-weight:700}
img{max-width:100%;height:auto;background:#fff;border:1px solid #dcdfe4;display:block;
margin:6px 0}
pre,code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#fff;border:1px solid #dcdfe4;padding:8px;white-space:pre-wrap;margin:4px 0}
.violation{border-left:3px solid #c62828;padding-left:10px;margin:6px 0 12px}
.muted{color:#5f6368}footer{margin-top:32px;color:#5f6368;font-size:12px}
"""


def esc(value: object) -> str:
    """Text made inert for HTML: a trace can hold anything, including markup."""
    return html.escape(str(value), quote=True)


def table(head: Sequence[str], rows: Iterable[Sequence[object]],
           numeric: Sequence[int] = ()) -> str:
    """A table of escaped cells; columns in ``numeric`` are right-aligned."""
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            out.append(f"<td{cls}>{esc(cell)}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def img_tag(png: bytes | None, alt: str) -> str:
    """A PNG embedded as a data URI, or a line saying there was nothing to draw."""
    if png is None:
        return f'<p class="muted">{esc(alt)}: nothing to draw.</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def document(title: str, body: str) -> str:
    """A whole page: ``title`` (escaped here) and ``body`` (HTML, already escaped)."""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>"
            f"{body}</main></body></html>\n")
