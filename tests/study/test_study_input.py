"""Bad study files exit 2 with one message naming the file and the field, before anything
runs or is written; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main

GOOD = """\
name: tiny
protocol: {name: torchelastic, knobs: {max_restarts: 3, pg_timeout: 600}}
cluster: {nodes: 4, gpus_per_node: 2}
workload: {step_time: 10, checkpoint_interval: 600}
failures:
  mtbf_per_node: 43200
  causes:
    - {name: node, share: 1, effect: host, downtime: 300}
horizon_days: 0.1
replications: 3
"""

CASES = [
    # (name, text, substrings the one message must contain)
    ("malformed_yaml", "name: x\nprotocol: {name: torchelastic\ncluster: [\n",
     ["line 3", "invalid YAML"]),
    ("unknown_field", GOOD.replace("step_time: 10", "step_time: 10, stpe_time: 3"),
     ["workload.stpe_time", "unknown field", "step_time"]),
    ("negative_interval", GOOD.replace("checkpoint_interval: 600", "checkpoint_interval: -600"),
     ["workload.checkpoint_interval", "greater than 0", "-600"]),
    ("negative_downtime", GOOD.replace("downtime: 300", "downtime: -5"),
     ["failures.causes[0].downtime", "greater than or equal to 0", "-5"]),
    ("unknown_protocol", GOOD.replace("name: torchelastic", "name: torchelasticc"),
     ["protocol.name", "torchelastic, static", "'torchelasticc'"]),
    ("missing_published_file", GOOD.replace(
        "  mtbf_per_node: 43200\n  causes:\n    - {name: node, share: 1, effect: host, "
        "downtime: 300}\n", "  published: data/nowhere.yaml\n"),
     ["failures.published", "nowhere.yaml"]),
]


@pytest.mark.parametrize("name,text,needles", CASES, ids=[c[0] for c in CASES])
def test_a_bad_study_exits_2_with_one_message_naming_file_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str,
        needles: list[str]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    rc = main(["study", str(path), "--out", str(out), "--no-cache"])
    captured = capsys.readouterr()
    assert rc == 2
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert str(path) in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not out.exists()


def test_the_good_study_runs_and_writes_its_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The cases above differ from a study that runs (so each fails for its own reason)."""
    path = tmp_path / "good.yaml"
    path.write_text(GOOD, encoding="utf-8")
    out = tmp_path / "out"
    rc = main(["study", str(path), "--out", str(out), "--no-cache", "--method", "composed"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "goodput (95% CI)" in captured.out
    assert sorted(p.name for p in out.iterdir()) == ["goodput.png", "study.html", "study.json"]
