"""What a user points the tool at is read strictly and boundedly: duplicate YAML keys, a
typo in a nested entry, deep nesting, huge or endless files, and a malformed trace or
summary for ``report`` each exit 2 with one line naming the file and the line or field."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from elastic_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
BASE = "protocol: {name: static}\ncluster: {hosts: 2}\n"


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI; it must exit 2 with one line on stderr, which is returned."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return err.strip()


def test_a_duplicate_key_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = tmp_path / "dup.yaml"
    sc.write_text(BASE + "seed: 1\nworkload:\n  steps: 10\n  step_time: 0.1\n  steps: 20\n")
    err = refused(capsys, "validate", str(sc))
    assert err == (f"error: {sc}: line 7, column 3: duplicate key 'steps' (first given at "
                   "line 5)")


def test_a_typo_inside_an_epoch_logs_entry_is_an_unknown_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "scenarios" / "horovod" / "single_rank_failure.yaml").read_text()
    assert "{start_rank: 2, size: 2, rendezvous: 2}" in text
    sc = tmp_path / "typo.yaml"
    sc.write_text(text.replace("{start_rank: 2, size: 2, rendezvous: 2}",
                               "{start_rank: 2, sise: 2, rendezvous: 2}", 1))
    err = refused(capsys, "validate", str(sc))
    assert f"{sc}: expect.epoch_logs[1].sise: unknown field 'sise' (did you mean 'size'?)" in err


@pytest.mark.parametrize("style", ["flow", "block"])
def test_deep_nesting_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], style: str
) -> None:
    if style == "flow":
        deep = "x: " + "[" * 500 + "]" * 500 + "\n"
    else:
        deep = "x:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(500))
    sc = tmp_path / "deep.yaml"
    sc.write_text(BASE + deep)
    err = refused(capsys, "validate", str(sc))
    match = re.match(rf"error: {re.escape(str(sc))}: line (\d+), column \d+: nested deeper "
                     "than 32 levels$", err)
    assert match, err
    # Flow style: all on line 3; block style: the 33rd level is a line of its own.
    assert int(match[1]) == (3 if style == "flow" else 3 + 31)


def test_nesting_a_scenario_needs_is_accepted(tmp_path: Path) -> None:
    sc = tmp_path / "ok.yaml"
    sc.write_text(BASE + "faults:\n  - {type: crash, host: h1, at: 1, when: {event: step, "
                  "match: {step: 3}}}\n")
    assert main(["validate", str(sc)]) == 0


def test_a_huge_scenario_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = tmp_path / "huge.yaml"
    sc.write_text(BASE + "description: " + "x" * (2 << 20) + "\n")
    assert refused(capsys, "validate", str(sc)) == f"error: {sc}: cannot read: larger than 1 MiB"


def replay(tmp_path: Path, file: str) -> Path:
    sc = tmp_path / "replay.yaml"
    sc.write_text(BASE + f"faults:\n  - {{type: replay, file: {file}}}\n")
    return sc


def test_dev_zero_as_a_replay_trace_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = replay(tmp_path, "/dev/zero")
    err = refused(capsys, "validate", str(sc))
    assert err == (f"error: {sc}: faults[0].file: cannot read failure trace /dev/zero: "
                   "not a regular file")


def test_a_fifo_as_a_replay_trace_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(tmp_path / "pipe.csv")
    err = refused(capsys, "validate", str(replay(tmp_path, "pipe.csv")))
    assert "faults[0].file" in err and "not a regular file" in err


def test_a_replay_trace_past_16_mib_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:
        fh.write(b"time,host\n")
        fh.truncate(17 << 20)  # sparse: no disk used
    err = refused(capsys, "validate", str(replay(tmp_path, "big.csv")))
    assert "faults[0].file" in err and "larger than 16 MiB" in err


def test_a_small_replay_trace_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "ok.csv").write_text("time,host\n1.5,h1\n")
    assert main(["validate", str(replay(tmp_path, "ok.csv"))]) == 0


# -- report reads back what a run wrote, checking it -----------------------------------

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["run", str(ROOT / "scenarios" / "scale_down.yaml"), "--out", str(out),
                 "--quiet", "--no-report"]) == 0
    return out


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    out.mkdir()
    for name in ("trace.jsonl", "summary.json"):
        (out / name).write_bytes((run_dir / name).read_bytes())
    return out


@pytest.mark.parametrize(("line", "problem"), [
    ('{"t":1.0,"host":"h0","kind":"step"}', "field 'proc': expected a string, got None"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"t":', "not JSON"),
    ('{"t":"soon","host":"h0","proc":"p","kind":"k"}', "field 't': expected a number"),
    ('{"t":1,"host":"h0","proc":"p","kind":"k","data":[1]}', "field 'data': expected an object"),
])
def test_report_names_the_first_bad_trace_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, problem: str
) -> None:
    out = copy_of(run_dir, tmp_path)
    lines = (out / "trace.jsonl").read_text().splitlines()
    lines[6] = line
    lines[9] = "garbage"  # a later bad line: the first one is named
    (out / "trace.jsonl").write_text("\n".join(lines) + "\n")
    err = refused(capsys, "report", str(out))
    assert err.startswith(f"error: {out / 'trace.jsonl'}: line 7: {problem}")
    assert not (out / "report.html").exists()


@pytest.mark.parametrize(("edit", "where"), [
    (lambda s: s.update(metrics=[1]), "metrics: expected an object"),
    (lambda s: s["scenario"].update(workload="big"), "scenario.workload: expected an object"),
    (lambda s: s.update(checks=[1, 2]), "checks: expected a list"),
    (lambda s: s["metrics"].update(end_time="late"), "metrics.end_time: expected a number"),
])
def test_report_names_the_bad_field_of_a_summary(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object,
    where: str,
) -> None:
    out = copy_of(run_dir, tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    edit(summary)  # type: ignore[operator]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    err = refused(capsys, "report", str(out))
    assert err.startswith(f"error: {out / 'summary.json'}: {where}")


def test_report_names_the_line_of_a_summary_that_is_not_json(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(run_dir, tmp_path)
    (out / "summary.json").write_text('{\n  "seed": 1,\n  "verdict": pass\n}\n')
    err = refused(capsys, "report", str(out))
    assert err.startswith(f"error: {out / 'summary.json'}: line 3: not JSON")


def test_a_campaign_report_names_a_bad_summary_too(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    good = copy_of(run_dir, tmp_path)
    good.rename(runs.mkdir() or runs / "a")
    bad = runs / "b"
    bad.mkdir()
    (bad / "summary.json").write_text('{"checks": "none"}')
    err = refused(capsys, "report", str(runs))
    assert err.startswith(f"error: {bad / 'summary.json'}: checks: expected a list")


def test_report_still_renders_a_good_run(run_dir: Path, tmp_path: Path) -> None:
    out = copy_of(run_dir, tmp_path)
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").is_file()
