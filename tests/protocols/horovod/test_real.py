"""The same Horovod scenarios in real mode: the driver, its task services and workers are
OS processes, the rank-and-size service speaks TCP messages, the rendezvous store is a
TCPStore and the groups are Gloo. The upstream assertions hold there too, and nothing is
left running."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from tests.procs import processes_mentioning
from tests.protocols.horovod.util import SCENARIOS

pytest.importorskip("torch", reason="real mode needs torch")
pytestmark = [pytest.mark.real, pytest.mark.slow]


def run_real(tmp_path: Path, name: str) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path / name
    rc = main(["run", str(SCENARIOS / f"{name}.yaml"), "--mode", "real", "--out", str(out),
               "--quiet", "--no-report"])
    return rc, json.loads((out / "summary.json").read_text()), out



def epoch_logs(out: Path) -> list[tuple[Any, ...]]:
    lines = (out / "trace.jsonl").read_text().splitlines()
    logs = [json.loads(line)["data"] for line in lines if '"kind":"epoch_log"' in line]
    return [(d["size"], d["start_rank"], d["rendezvous"]) for d in logs]


@pytest.mark.parametrize(("name", "logs"), [
    ("hosts_added_and_removed", [(2, 0, 1), (4, 0, 2), (2, 2, 3)]),
    ("single_rank_failure", [(4, 0, 1), (2, 2, 2), (2, 2, 2)]),
    ("single_rank_failure_kill", [(4, 0, 1), (2, 2, 2), (2, 2, 2)]),
])
def test_upstream_assertions_hold_in_real_mode(
    tmp_path: Path, name: str, logs: list[tuple[int, int, int]]
) -> None:
    rc, summary, out = run_real(tmp_path, name)
    failed = [c["name"] for c in summary["checks"] if not c["ok"]]
    unmet = [e for e in summary["expectations"] if not e["ok"]]
    assert (rc, failed, unmet) == (0, [], [])
    assert epoch_logs(out) == logs
    assert summary["exit_codes"]["localhost/main"] == 0
    assert processes_mentioning(str(out)) == []
