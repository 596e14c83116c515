"""Real mode injects preemption (SIGTERM, grace, SIGKILL) and stragglers (SIGSTOP/SIGCONT
duty cycle) into real processes, with the same trace events as the sim."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.cli import main
from tests.faults.util import BASE, first_full, sizes_after_a_death

pytest.importorskip("torch", reason="real mode needs torch (pip install torch==2.13.0)")
pytestmark = [pytest.mark.real, pytest.mark.slow]


def run_real(tmp: Path, faults: list[dict[str, Any]], steps: int = 60
             ) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    raw = copy.deepcopy(BASE)
    raw["workload"]["steps"] = steps
    # Real processes on a shared CI machine reach the store up to seconds apart after GO:
    # a 1 s last call can close the first round with three of the four (world sizes
    # [3, 4, 3]). The round closes as soon as the fourth arrives, so a longer last call
    # costs nothing then; it only lengthens the re-rendezvous after a fault.
    raw["protocol"]["knobs"]["last_call"] = 5.0
    raw["faults"] = faults
    path = tmp / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp / "out"
    rc = main(["run", str(path), "--mode", "real", "--out", str(out), "--quiet", "--no-report"])
    events = [json.loads(line) for line in (out / "trace.jsonl").open()]
    return rc, json.loads((out / "summary.json").read_text()), events


def test_preemption_terminates_the_host_and_the_others_finish(tmp_path: Path) -> None:
    rc, s, ev = run_real(tmp_path, [{"id": "p", "type": "preempt", "host": "h3", "at": 3.0,
                                     "grace": 2.0}])
    assert s["faults"][0]["fired"] and s["faults"][0]["type"] == "preempt"
    assert s["exit_codes"]["h3/main"] == -15  # no TERM handler: SIGTERM ends it
    assert first_full(s["metrics"]["world_sizes"]) == sizes_after_a_death(ev, 3.0)
    assert rc == 0 and s["metrics"]["outcome"] == "completed"
    phases = [e["data"]["phase"] for e in ev if e["kind"] == "fault"]
    assert phases == ["start"]  # nothing left to SIGKILL after the grace


def test_a_straggler_slows_the_synchronous_job_while_it_lasts(tmp_path: Path) -> None:
    start, length = 5.0, 3.0
    rc, s, ev = run_real(tmp_path, [{"id": "s", "type": "straggler", "host": "h2",
                                     "at": start, "factor": 4.0, "duration": length}],
                         steps=150)
    assert rc == 0 and s["faults"][0]["fired"]
    assert [e["data"]["phase"] for e in ev if e["kind"] == "fault"] == ["start", "heal"]
    steps = [e["t"] for e in ev if e["kind"] == "step" and e["host"] == "h0"]
    before = sum(1 for t in steps if start - length <= t < start)
    during = sum(1 for t in steps if start <= t < start + length)
    # Relative to the same run's own pace just before (after start-up): running a quarter
    # of the time, h2 holds every allreduce back (generous bound: the machine is shared).
    assert before > 0 and during < 0.7 * before


def test_a_real_signal_reaches_the_agent_and_ends_it_by_its_default_action(
        tmp_path: Path) -> None:
    rc, s, ev = run_real(tmp_path, [{"id": "u", "type": "signal", "host": "h3", "at": 3.0,
                                      "signal": "USR1"}])
    assert s["faults"][0]["fired"] and s["faults"][0]["type"] == "signal"
    assert s["exit_codes"]["h3/main"] == -10  # the static protocol handles no SIGUSR1
    assert first_full(s["metrics"]["world_sizes"]) == sizes_after_a_death(ev, 3.0)
    assert rc == 0 and s["metrics"]["outcome"] == "completed"


def test_a_real_crash_loop_fails_the_workers_started_after_it(tmp_path: Path) -> None:
    from elastic_sim.real.faults import startfaults

    startfaults.add_loop(tmp_path, "h1", "f", "workers", 2)
    env = [startfaults.take(tmp_path, "h1", is_agent=False) for _ in range(3)]
    assert [startfaults.FAIL in e for e in env] == [True, True, False]
    assert startfaults.take(tmp_path, "h1", is_agent=True) == {}
    startfaults.add_delay(tmp_path, "h2", 1.5)
    assert startfaults.take(tmp_path, "h2", is_agent=False) == {startfaults.DELAY: "1.5"}
