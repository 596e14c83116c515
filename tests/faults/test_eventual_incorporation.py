"""Liveness: once quiet, the world takes in every available host (up to the
maximum). The static protocol admits a returning host at its next commit; with
admit_waiting off it never does, and the check says so."""

from __future__ import annotations

from pathlib import Path

from elastic_sim.checks.facts import limits_of
from tests.faults.util import run

HANG = [{"id": "hang-h3", "type": "hang", "host": "h3", "at": 5.0, "duration": 40.0}]


def long_job(tmp: Path, admit_waiting: bool) -> list[str]:
    out = run(tmp, HANG, workload={"steps": 2000, "step_time": 0.1, "commit_every": 10,
                                   "state_bytes": 65536},
              protocol={"name": "static",
                        "knobs": {"min_hosts": 2, "max_hosts": 4, "last_call": 1.0,
                                  "group_timeout": 30, "admit_waiting": admit_waiting}})
    done = out.of("job_done")[0].t
    settle = limits_of(out.events[0].get("knobs")).settle_s  # type: ignore[union-attr]
    assert done - 45.0 > settle  # long enough after the heal to be judged
    return out.violations


def test_a_host_back_from_a_hang_is_admitted_again(tmp_path: Path) -> None:
    assert long_job(tmp_path, admit_waiting=True) == []


def test_a_host_left_waiting_for_good_is_a_liveness_violation(tmp_path: Path) -> None:
    assert long_job(tmp_path, admit_waiting=False) == ["eventual_incorporation"]
