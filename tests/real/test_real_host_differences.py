"""Per-host differences in real mode: the same scenario description the sim reads (a
slower step on one host, a later start on another) is honoured by real processes."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import pytest
import yaml

from elastic_sim.cli import main

SCENARIO = {
    "name": "hosts_differ",
    "time_limit": 120,
    "protocol": {"name": "static",
                 "knobs": {"min_hosts": 2, "max_hosts": 2, "last_call": 0.5,
                           "group_timeout": 30}},
    "cluster": {"hosts": ["h0", {"name": "h1", "step_factor": 3, "start_delay": 2}],
                "store_host": "h0"},
    "workload": {"steps": 12, "step_time": 0.1, "commit_every": 4, "state_bytes": 4096},
}


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_slow_late_host_stretches_the_steps_and_starts_late_for_real(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    out = tmp_path / "out"
    rc = main(["run", str(path), "--mode", "real", "--out", str(out), "--quiet"])
    events = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert rc == 0, [e for e in events if e["kind"] in ("proc_exit", "job_failed")]
    starts = {e["host"]: e["t"] for e in events if e["kind"] == "proc_start"}
    first = {h: min(e["t"] for e in events if e["host"] == h and e["proc"] == f"{h}/main"
                    and e["kind"] not in ("proc_start",)) for h in ("h0", "h1")}
    assert first["h1"] - starts["h1"] >= 2.0 > first["h0"] - starts["h0"]  # its start_delay
    steps = sorted(e["t"] for e in events if e["kind"] == "step" and e["host"] == "h0")
    gaps = sorted(b - a for a, b in itertools.pairwise(steps))
    assert len(steps) == 12 and gaps[len(gaps) // 2] >= 0.28, gaps  # h1's 0.3 s per step
