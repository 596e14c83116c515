"""No check passes vacuously: for every check there is a shipped scenario where it fails for
the right reason (its message and the kinds of its witness events) and one where it passes
having examined something; a check that examined nothing reads "n/a", never a pass."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from elastic_sim.checks import CHECKS, CheckResult, run_checks
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2] / "scenarios"

FAILS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "membership_agreement": ("torchelastic/clock_skew.yaml", "disagree on members",
                             ("rdzv_done", "rdzv_done")),
    "rank_validity": ("torchelastic/clock_skew.yaml", "is not its place in the agreed",
                      ("rdzv_done",)),
    "collective_sequence": ("broken_uneven_sync.yaml",
                            "h0 entered allreduce(24 B), h1 entered allreduce(32 B)",
                            ("coll_enter", "coll_enter")),
    "state_agreement": ("broken_skip_sync.yaml", "but the root h0 holds step 0",
                        ("sync", "sync")),
    "committed_progress": ("found/horovod/fresh_rank_restore_discards_synced_model.yaml",
                           "restored step 0, but its last commit was step 10",
                           ("sync", "restore")),
    "reset_callback_state": ("horovod/reset_callback_sees_pre_sync_state.yaml",
                             "reset callback read step 0 (epoch 1), but the sync that "
                             "followed brought step 10", ("reset_callback", "sync")),
    "members_alive_at_completion": ("found/torchelastic/dead_participant_completes_round.yaml",
                                    "h2 had no live process then",
                                    ("proc_exit", "rdzv_complete")),
    "master_agreement": ("found/torchelastic/stale_bootstrap_master_after_rank0_hang.yaml",
                         "was told master", ("rdzv_done", "rdzv_done")),
    "epoch_isolation": ("broken_late_round_record.yaml", "h0 entered it in round 1, h2 in "
                        "round 0", ("rdzv_done", "coll_enter", "rdzv_done", "coll_enter")),
    "one_world_at_a_time": ("broken_two_worlds.yaml",
                            "round 1 (h2, h3) and round 2 (h0, h1) trained at the same time "
                            "with no member in common", ("rdzv_done", "rdzv_done", "step",
                                                         "step")),
    "limits": ("torchelastic/clock_skew.yaml", "world size 1 outside [2, 3]", ("rdzv_done",)),
    "restart_accounting": ("torchelastic/hot_spare_takes_over_no_shared_store.yaml",
                           "workers were told restart 1", ("workers_started", "workers_started")),
    "healthy_hosts_kept": ("broken_drop_last_arrival.yaml", "never failed and could go on",
                           ("rdzv_done", "rdzv_done")),
    "rendezvous_closed_by_job_end": ("torchelastic/scale_up.yaml",
                                     "closed the rendezvous for everyone after its own failure",
                                     ("job_failed", "rdzv_shutdown")),
    "avoidable_job_failure": ("torchelastic/scale_up.yaml",
                              "though 3 hosts (h0, h1, h2) were alive, reachable",
                              ("job_failed", "run_end")),
    "clean_shutdown": ("torchelastic/clock_skew.yaml", "recorded exit_barrier_failed",
                       ("exit_barrier_failed",)),
    "no_pointless_reconfiguration": ("broken_rejoin_at_commit.yaml",
                                     "same members and ranks", ("rdzv_done", "rdzv_done")),
    "terminates": ("found/torchelastic/hot_spare_wait_list_livelock.yaml",
                   "still going at the time limit", ("step", "run_end")),
    "progress_after_faults": (
        "found/torchelastic/survivors_wait_out_the_group_timeout_after_a_crash.yaml",
        "but no new world formed and no step came within 49.5 s",
        ("fault", "proc_exit", "rdzv_complete")),
    "no_restart_loop": ("found/torchelastic/stale_bootstrap_master_after_rank0_hang.yaml",
                        "rounds in a row without training", ("rdzv_done", "rdzv_done")),
    "eventual_incorporation": ("broken_never_admits.yaml", "h3 was available from 45 s on",
                               ("rdzv_done", "fault")),
    "time_advances": ("broken_spin_at_commit.yaml", "without virtual time advancing; spinning: h0",
                      ("commit", "commit", "commit", "run_stopped")),
    "ft_quorum_ids": ("torchft/broken_new_id_always.yaml",
                      "issued quorum 2 after 1, where nothing changed: upstream gives it id 1",
                      ("lh_quorum", "lh_quorum")),
    "ft_quorum_validity": ("torchft/broken_no_split_brain_rule.yaml",
                           "2 healthy participants of 4 heartbeating replicas, no strict "
                           "majority", ("lh_quorum", "lh_quorum")),
    "ft_state_agreement": ("torchft/broken_skip_heal.yaml", "g0 holds state",
                           ("step", "step")),
    "ft_data_position_agreement": ("torchft/data_position_not_healed.yaml",
                                   "g0 holds data position 9, g1 holds 8", ("step", "step")),
    "ft_unanimous_commit": ("torchft/broken_own_vote.yaml", "its ranks got different decisions",
                            ("ft_should_commit", "ft_should_commit")),
    "ft_single_heal_source": ("torchft/heal_sources_per_rank.yaml", "from g0, g1",
                              ("ft_heal", "ft_heal")),
    "ft_fault_isolation": ("torchft/restarted_rank_reads_old_manager_address.yaml",
                           "replica group g1, which no fault touched, failed at 26.5265 s",
                           ("fault", "ft_replica_failed")),
    "ft_group_recovers": ("torchft/restarted_group_never_returns.yaml",
                          "replica group g0 was given up at 134.434 s after 3 failed starts "
                          "with 1 fault(s) against it", ("fault", "ft_replica_failed",
                                                         "job_failed")),
    "ft_liveness": ("torchft/broken_heartbeats_never_expire.yaml",
                    "no committed step within 80 s after kill-g1-rank", ("fault", "run_end")),
}
"""Check -> (scenario, a fragment of its first violation's message, its witness kinds)."""

GUARDS_OF_THE_TOOL = {"within_run_guards": "tests/bounds/test_guards.py"}
"""Checks no scenario's content can fail: they judge the tool's own limits (--wall-limit,
--memory-limit are options of a run, not of a scenario). Their failing runs are shown by
the tests named here, with protocol entries made to exceed the limits."""

PASSES: dict[str, str] = {
    "membership_agreement": "scale_down.yaml",
    "rank_validity": "scale_down.yaml",
    "collective_sequence": "scale_down.yaml",
    "state_agreement": "scale_down.yaml",
    "committed_progress": "scale_down.yaml",
    "reset_callback_state": "horovod/reset_callback_after_failure.yaml",
    "members_alive_at_completion": "scale_down.yaml",
    "master_agreement": "torchelastic/worker_crash.yaml",
    "epoch_isolation": "scale_down.yaml",
    "one_world_at_a_time": "two_hosts_arrive_together.yaml",
    "limits": "scale_down.yaml",
    "restart_accounting": "torchelastic/worker_crash.yaml",
    "healthy_hosts_kept": "horovod/single_rank_failure.yaml",
    "rendezvous_closed_by_job_end": "torchelastic/scale_up_no_shared_store.yaml",
    "avoidable_job_failure": "torchelastic/below_min_nodes.yaml",
    "clean_shutdown": "horovod/single_rank_failure.yaml",
    "no_pointless_reconfiguration": "torchelastic/worker_crash.yaml",
    "terminates": "scale_down.yaml",
    "progress_after_faults": "scale_down.yaml",
    "no_restart_loop": "scale_down.yaml",
    "eventual_incorporation": "hang_rejoins.yaml",
    "time_advances": "scale_down.yaml",
    "within_run_guards": "scale_down.yaml",
    "ft_quorum_ids": "torchft/replica_crash.yaml",
    "ft_quorum_validity": "torchft/replica_crash.yaml",
    "ft_state_agreement": "torchft/replica_crash.yaml",
    "ft_data_position_agreement": "torchft/heal_sources_per_rank.yaml",
    "ft_unanimous_commit": "torchft/heal_sources_per_rank.yaml",
    "ft_single_heal_source": "torchft/replica_crash.yaml",
    "ft_fault_isolation": "torchft/replica_crash.yaml",
    "ft_group_recovers": "torchft/two_replicas_restart.yaml",
    "ft_liveness": "torchft/replica_crash.yaml",
}
"""Check -> a shipped scenario where it passes having examined something."""

NAMES = [c.__name__ for c in CHECKS]


@cache
def checks_of(rel: str) -> dict[str, CheckResult]:
    sc = load_scenario(ROOT / rel)
    events, _, _ = simulate(sc, sc.seed)
    return {r.name: r for r in run_checks(events)}


def test_every_check_has_a_failing_and_a_passing_scenario() -> None:
    assert sorted([*FAILS, *GUARDS_OF_THE_TOOL]) == sorted(NAMES)
    assert sorted(PASSES) == sorted(NAMES)
    root = ROOT.parent
    assert all((root / test).exists() for test in GUARDS_OF_THE_TOOL.values())


@pytest.mark.parametrize("name", [n for n in NAMES if n not in GUARDS_OF_THE_TOOL])
def test_a_shipped_scenario_shows_the_check_failing_for_the_right_reason(name: str) -> None:
    rel, fragment, kinds = FAILS[name]
    res = checks_of(rel)[name]
    assert res.status == "fail", f"{name} did not fail on {rel}"
    first = res.violations[0]
    assert fragment in first.message
    assert tuple(ev.kind for ev in first.witness) == kinds


@pytest.mark.parametrize("name", NAMES)
def test_a_shipped_scenario_shows_the_check_passing_having_examined_something(name: str) -> None:
    res = checks_of(PASSES[name])[name]
    assert (res.status, res.ok) == ("pass", True)
    assert res.checked > 0 and res.examined.endswith(" checked")


def test_a_check_that_examined_nothing_is_not_applicable_not_a_pass() -> None:
    res = checks_of("scale_down.yaml")["master_agreement"]  # static records no master
    assert (res.status, res.checked, res.examined) == ("n/a", 0, "nothing to check")
    assert res.ok and not res.applicable


def test_incorporation_is_judged_for_horovod_too() -> None:
    res = checks_of("horovod/found_spawn_to_dead_host_fails.yaml")["eventual_incorporation"]
    assert (res.status, res.examined) == ("pass", "1 host checked")


def test_summary_and_console_say_n_a_and_what_was_examined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from elastic_sim.cli import main

    out = tmp_path / "run"
    assert main(["run", str(ROOT / "scale_down.yaml"), "--out", str(out), "--no-report"]) == 0
    text = capsys.readouterr().out
    checks = {c["name"]: c for c in json.loads((out / "summary.json").read_text())["checks"]}
    assert (checks["master_agreement"]["status"], checks["master_agreement"]["examined"]) == (
        "n/a", "nothing to check")
    assert checks["rank_validity"]["status"] == "pass"
    assert checks["rank_validity"]["examined"] == "2 rounds checked"
    # n/a is always listed with why; what a passing check examined, with -v.
    assert "n/a master_agreement: " in text and "(nothing to check)" in text
    assert main(["run", str(ROOT / "scale_down.yaml"), "--out", str(out), "--no-report",
                 "--force", "-v"]) == 0
    assert "(2 rounds checked)" in capsys.readouterr().out
