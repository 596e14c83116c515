"""Real mode refuses, before starting anything, every fault it cannot inject for real:
exit 2 with one message naming the file, the fault entry, the type and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.faults.model import FAULT_TYPES, Refusal
from elastic_sim.real.faults.injector import real_handler
from tests.faults.test_fault_schema import EXAMPLES, HEAD, head_for

REAL = {"crash", "crash_process", "hang", "preempt", "scale_down", "straggler", "signal",
        "crash_loop", "slow_start", "link", "conn_reset"}


def test_real_mode_has_a_handler_for_each_type_it_injects() -> None:
    for kind in REAL:
        assert not isinstance(real_handler(FAULT_TYPES[kind]), Refusal | None), kind


@pytest.mark.parametrize("kind", sorted(set(EXAMPLES) - REAL | {"link", "conn_reset"}))
def test_a_fault_real_mode_cannot_inject_is_refused_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ip/nft: partitions cannot be cut either
    path = tmp_path / "s.yaml"
    path.write_text(head_for(kind) + "  - {type: crash, host: h1, at: 5}\n"
                    + f"  - {EXAMPLES[kind]}\n")
    out = tmp_path / "out"
    rc = main(["run", str(path), "--mode", "real", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"{path}: faults[1]: fault 'f1-{kind}' ({kind}):" in err
    assert "--mode sim" in err
    assert not (out / "trace.jsonl").exists()


def test_an_event_trigger_is_refused_in_real_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "  - {type: crash, host: h1, at_step: 5}\n")
    assert main(["run", str(path), "--mode", "real", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "faults[0]" in err and "trace events" in err


def test_a_failure_model_is_refused_by_its_entry_when_it_restarts_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "  - {type: hang, host: h0, at: 1, duration: 1}\n"
                           "  - {type: mtbf, mtbf: 5, until: 50, downtime: 2}\n")
    assert main(["run", str(path), "--mode", "real", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "faults[1]" in err and "crash_restart" in err
