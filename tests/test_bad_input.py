"""Bad input exits 2 with one message naming the file and the field; nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elastic_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
protocol: {name: static, knobs: {min_hosts: 2, max_hosts: 4}}
cluster: {hosts: 4}
workload: {steps: 10, step_time: 0.1, commit_every: 5}
faults:
  - {type: crash, host: h3, at: 0.5}
"""

CASES = [
    # (name, text, substrings the one message must contain)
    ("misspelled_key", GOOD.replace("steps: 10", "stpes: 10"),
     ["workload.stpes", "unknown field", "did you mean 'steps'"]),
    ("unknown_host", GOOD.replace("host: h3", "host: h9"),
     ["faults[0].host", "unknown host 'h9'", "h0, h1, h2, h3"]),
    ("negative_time", GOOD.replace("at: 0.5", "at: -1"),
     ["faults[0].at", "greater than or equal to 0", "-1"]),
    ("unknown_fault", GOOD.replace("type: crash", "type: explode"),
     ["faults[0].type", "unknown fault type 'explode'", "crash, crash_process, hang, partition"]),
    ("invalid_yaml", "protocol: {name: static\ncluster: [",
     ["line ", "invalid YAML"]),
    ("empty_file", "", ["empty scenario", "protocol, cluster"]),
    ("not_a_mapping", "- 1\n- 2\n", ["expected a mapping"]),
    ("unknown_knob", GOOD.replace("min_hosts: 2", "min_host: 2"),
     ["protocol.knobs.min_host", "did you mean 'min_hosts'"]),
    ("wrong_type", GOOD.replace("steps: 10", "steps: ten"),
     ["workload.steps", "valid integer", "'ten'"]),
    ("min_above_hosts", GOOD.replace("min_hosts: 2, max_hosts: 4", "min_hosts: 6, max_hosts: 8"),
     ["protocol.knobs.min_hosts", "number of hosts (4)"]),
]


@pytest.mark.parametrize("name,text,needles", CASES, ids=[c[0] for c in CASES])
def test_bad_scenario_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, needles: list[str]
) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    out_dir = tmp_path / "out"
    rc = main(["run", str(path), "--out", str(out_dir)])
    captured = capsys.readouterr()
    assert rc == 2
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1, captured.err
    assert str(path) in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in captured.err + captured.out
    assert not out_dir.exists(), "nothing may be written for bad input"


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "nope.yaml" in err and "no such file" in err
    assert not (tmp_path / "out").exists()


def test_real_mode_refuses_partitions_before_starting_where_it_cannot_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ip, no nft: no network cut
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace(
        "{type: crash, host: h3, at: 0.5}",
        "{type: partition, groups: [[h0, h1], [h2, h3]], at: 0.5, duration: 1}"))
    rc = main(["run", str(path), "--mode", "real", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "faults[0]" in err and "network cut" in err
    assert not (tmp_path / "out").exists()


def test_real_mode_refuses_cuda_where_torch_sees_no_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started anyway, its workers' NCCL groups fail and restart until the time limit."""
    pytest.importorskip("torch", reason="real mode needs torch")
    import elastic_sim.backends.real as real

    monkeypatch.setattr(real, "_gpus", lambda: 0)
    path = tmp_path / "g.yaml"
    path.write_text(GOOD.replace("cluster: {", "cluster: {device: cuda, "))
    rc = main(["run", str(path), "--mode", "real", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1
    assert "cluster.device" in err[0] and "no CUDA GPU" in err[0]
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(real, "_gpus", lambda: 1)  # with one: it would start
    lacks = real.RealBackend().lacks
    from elastic_sim.spec import compile_spec

    assert lacks(compile_spec(path, mode="sim")) is None


def test_console_script_prints_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("at: 0.5", "at: -3"))
    proc = subprocess.run(
        [sys.executable, "-m", "elastic_sim.cli", "run", str(path)],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "faults[0].at" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_negative_seed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path), "--seed", "-4"])
    assert exc.value.code == 2
    assert "non-negative" in capsys.readouterr().err
