"""The trace's event kinds are documented once, from the code: every ``record(kind, ...)``
call in the protocols and runtimes uses a listed kind with listed fields, every listed kind
is recorded somewhere, and docs/trace-events.md is what ``python -m elastic_sim.tracedoc``
writes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from elastic_sim.trace_kinds import BY_KIND, EVENT_KINDS, field_names
from elastic_sim.tracedoc import DEFAULT, render

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("protocols", "sim", "real") for p in sorted((ROOT / d).rglob("*.py"))
           if "tests" not in p.parts]
SOURCES += sorted((ROOT / "elastic_sim").glob("*.py"))


KIND_ARG = {"record": 0, "trace": 2, "event": 3}
"""Recording calls and where their kind is: rt.record(kind, **fields),
kernel.trace(host, proc, kind, data), writer.event(t, host, proc, kind, data)."""


def record_calls() -> list[tuple[str, str, set[str]]]:
    """(where, kind, fields) of every call that records an event with a literal kind (the
    fields: keywords, or the keys of a literal data dict)."""
    out = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            at = KIND_ARG.get(node.func.attr)
            if at is None or len(node.args) <= at:
                continue
            kind = node.args[at]
            if not (isinstance(kind, ast.Constant) and isinstance(kind.value, str)):
                continue
            fields = {k.arg for k in node.keywords if k.arg}
            data = node.args[at + 1] if len(node.args) > at + 1 else None
            if isinstance(data, ast.Dict):
                fields |= {k.value for k in data.keys if isinstance(k, ast.Constant)}
            out.append((f"{path.relative_to(ROOT)}:{node.lineno}", kind.value, fields))
    return out


def test_every_recorded_event_uses_a_listed_kind_and_listed_fields() -> None:
    calls = record_calls()
    assert len(calls) > 70
    unknown = [(w, k) for w, k, _ in calls if k not in BY_KIND]
    assert unknown == []
    extra = [(w, k, sorted(f - set(field_names(BY_KIND[k])))) for w, k, f in calls
             if not f <= set(field_names(BY_KIND[k]))]
    assert extra == []


def test_every_listed_kind_is_recorded_somewhere() -> None:
    recorded = {k for _, k, _ in record_calls()}
    literals = {c.value for p in SOURCES for c in ast.walk(ast.parse(p.read_text("utf-8")))
                if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    assert [k.kind for k in EVENT_KINDS if k.kind not in recorded | literals] == []
    assert len(BY_KIND) == len(EVENT_KINDS)  # no kind listed twice


def test_the_committed_table_is_what_the_generator_writes() -> None:
    assert DEFAULT.read_text(encoding="utf-8") == render(), (
        "docs/trace-events.md is stale: run python -m elastic_sim.tracedoc")


def test_the_table_names_the_checks_that_read_a_kind() -> None:
    row = next(line for line in render().splitlines() if line.startswith("| `hvd_blacklist`"))
    assert row.endswith(
        "| healthy_hosts_kept, no_restart_loop, eventual_incorporation, shared facts |")


def test_tracedoc_takes_help_and_refuses_an_option_instead_of_writing_a_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from elastic_sim.tracedoc import main

    monkeypatch.chdir(tmp_path)
    assert main(["--help"]) == 0
    assert "python -m elastic_sim.tracedoc [PATH]" in capsys.readouterr().out
    assert main(["--out"]) == 2 and "usage:" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    assert main([str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "t.md").read_text(encoding="utf-8") == render()
