"""The worker side: the run wrapper's restore/reset/sync rules, the State's notification
check (integer-second timestamps, strictly newer only), and the exit modes whose effect
peers see only through the Gloo timeout."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from elastic_sim.scenario import ClusterModel, parse_scenario
from elastic_sim.world import WAKE_LATENCY
from tests.protocols.horovod.util import load, raw, simulate_run


def with_(name: str, workload: dict[str, Any] | None = None, **top: Any) -> Any:
    """A shipped scenario with workload fields and top-level fields replaced; no
    expectations (the tests assert on the trace)."""
    data = load(name).model_dump()
    data["workload"].update(workload or {})
    data.update(top)
    data["expect"] = {}
    return data


def test_an_internal_error_restores_the_last_commit_before_the_reset() -> None:
    run = simulate_run(load("single_rank_failure"))
    restores = run.of("restore")
    assert restores and all(e.get("reason") in ("CollectiveFailed", "CollectiveTimeout")
                            for e in restores)
    assert run.metrics.lost_steps <= 1  # a commit every batch
    assert run.failed_checks == []


def test_after_removals_only_survivors_skip_the_sync_but_added_workers_sync() -> None:
    run = simulate_run(load("hosts_added_and_removed"))
    interrupts = [e.get("skip_sync") for e in run.of("hvd_interrupt")]
    assert interrupts == [False, False, True, True, True, True]
    assert sorted({e.get("round") for e in run.of("sync")}) == [1, 2]


def same_second(discovery_wait: float) -> Any:
    """hosts_added_and_removed with epochs so short that both changes are notified within
    one wall-clock second."""
    data = with_("hosts_added_and_removed", {"step_time": 0.01})
    data["protocol"]["knobs"].update(process_start_latency=0.2, discovery_wait=discovery_wait)
    if "process_start" in ClusterModel.model_fields:
        # where the sim charges a worker's interpreter start itself, drop it: the added
        # host's workers must start well within the second
        data["cluster"]["process_start"] = 0.0
    return simulate_run(parse_scenario(data))


def test_a_second_change_in_the_same_wall_clock_second_is_not_acted_on() -> None:
    # Upstream compares integer-second timestamps with '>': with epochs shorter than a
    # second the removal's notification carries the same timestamp as the addition's.
    run = same_second(discovery_wait=0)
    notes = run.of("hvd_notify")
    assert [n.get("update") for n in notes] == ["added", "removed"]
    assert notes[0].get("timestamp") == notes[1].get("timestamp")
    assert run.epoch_logs("size", "hostname") == [(2, "localhost"), (4, "localhost"),
                                                  (4, "localhost")]
    assert run.metrics.outcome == "completed"


def test_the_test_script_zeroes_the_timestamp_so_a_same_second_change_still_acts() -> None:
    # elastic_torch_main.py sets state._last_updated_timestamp = 0 on rank 0 before it
    # waits for an expected change, so the removal stamped in the same second interrupts.
    run = same_second(discovery_wait=3)
    notes = run.of("hvd_notify")
    assert [n.get("update") for n in notes] == ["added", "removed"]
    assert notes[0].get("timestamp") == notes[1].get("timestamp")
    assert run.epoch_logs("size", "hostname", "rendezvous") == [
        (2, "localhost", 1), (4, "localhost", 2), (2, "127.0.0.1", 3)]
    assert run.metrics.outcome == "completed"


def test_a_stopped_worker_is_seen_only_at_the_gloo_timeout_and_the_barrier_never_trips() -> None:
    run = simulate_run(load("single_rank_failure", exit_mode="silent"))
    (leave,) = run.of("hvd_scheduled_exit")
    fails = run.of("coll_fail")
    assert len(fails) == 3 and {e.get("error") for e in fails} == {"CollectiveTimeout"}
    assert all(30.0 <= e.t - leave.t < 31.0 for e in fails)
    assert run.of("hvd_trip") == [] and run.result.hung


def test_a_hung_training_script_stalls_its_peers_without_a_timeout() -> None:
    # Its background thread goes on negotiating: the others wait in their allreduce for
    # good, and rank 0's stall inspector warns at the first cycle past each 60 s
    run = simulate_run(load("single_rank_failure", exit_mode="hang"))
    (leave,) = run.of("hvd_scheduled_exit")
    assert run.of("coll_fail") == [] and run.of("hvd_trip") == [] and run.result.hung
    stalls = run.of("coll_stall")
    assert stalls and all(not e.get("shutdown") for e in stalls)
    assert stalls[0].get("missing") == {"0": ["allreduce"]}
    assert 60.0 < stalls[0].get("waited_s") < 120.0 and stalls[0].t - leave.t < 120.0
    assert [round(b.t - a.t, 6) for a, b in pairwise(stalls)] == [60.001] * (len(stalls) - 1)


def test_a_stall_shutdown_time_fails_every_rank_and_the_job_resets() -> None:
    # HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: the first check past it shuts Horovod down on
    # every rank; the survivors restore and reset without the hung one, which is blacklisted
    # once it is killed (it never exits on its own: the reset waits for it)
    run = simulate_run(load("single_rank_failure", exit_mode="hang", stall_shutdown_time=90))
    (stall,) = [e for e in run.of("coll_stall") if e.get("shutdown")]
    assert 90.0 < stall.get("waited_s") < 150.0
    assert {e.get("reason") for e in run.of("restore")} == {"CollectiveFailed"}
    assert all(e.t == stall.t for e in run.of("restore"))


def test_a_stall_shutdown_time_below_the_check_time_is_ignored() -> None:
    run = simulate_run(load("single_rank_failure", exit_mode="hang", stall_shutdown_time=30))
    assert run.of("coll_stall") and not any(e.get("shutdown") for e in run.of("coll_stall"))
    assert run.of("restore") == []


def test_a_silent_rank_zero_holds_the_discovery_lock_through_every_notification_try() -> None:
    hosts = ["localhost:2", "127.0.0.1:2"]
    data = with_("single_rank_failure", time_limit=600)
    knobs = data["protocol"]["knobs"]
    knobs.update(exit_mode="silent", new_host_order="sorted", max_np=None, discovery={
        "schedule": [{"until_s": 5.0, "hosts": hosts}, {"until_s": 10.0, "hosts": [*hosts, "h3:1"]},
                     {"hosts": [*hosts, "h3:1", "h4:1"]}]})
    data["cluster"]["hosts"] = ["localhost", "127.0.0.1", "h3", "h4"]
    run = simulate_run(parse_scenario(data))
    note, failed = run.of("hvd_notify")[0], run.of("hvd_notify_failed")[0]
    assert note.get("to") == failed.get("to") == "127.0.0.1/w0.1"
    assert abs(failed.t - note.t - 3 * (127.0 + WAKE_LATENCY)) < 1e-9  # three connect timeouts
    held = run.of("hvd_lock_held")[0]
    assert held.get("owner") == "discovery" and held.get("held_s") >= 3 * 127.0
    later = [e for e in run.of("hvd_discovery") if e.t > note.t]
    assert later and later[0].t > failed.t  # the change at 10 s waited for the lock


def test_a_blacklisted_host_returns_after_its_cooldown_and_backs_off_twice_as_long() -> None:
    data = with_("resurrecting_blacklisted_hosts", {"steps": 100})
    data["protocol"]["knobs"].update(
        epochs=10, epoch_wait=1.0, new_host_order="sorted", cooldown_range=[1, 10],
        exit_schedule=[{"epoch": 1, "batch": 0, "ranks": [3]},
                       {"epoch": 4, "batch": 5, "ranks": [3]}])
    run = simulate_run(parse_scenario(data))
    first, second = run.of("hvd_blacklist")
    assert first.get("target") == second.get("target") == "localhost"
    d1, d2 = first.get("cooldown_end") - first.t, second.get("cooldown_end") - second.t
    assert 2.0 <= d1 < 3.0 and 4.0 <= d2 < 5.0  # lower * 2**n + jitter * lower
    back = [e for e in run.of("hvd_discovery") if e.get("update") == "added"][1]
    assert first.get("cooldown_end") <= back.t < first.get("cooldown_end") + 0.05
    assert run.metrics.world_sizes == [4, 2, 4, 2, 4]
    assert run.metrics.outcome == "completed" and run.failed_checks == []


def test_a_sync_does_not_save_the_model_so_an_early_restore_goes_back_to_the_own_one() -> None:
    # Upstream's model handler broadcasts on sync but does not save: until its first commit
    # a freshly added worker's snapshot is still its initial model. The old host fails in
    # the first batch after the scale-up, the new worker restores that initial model, then
    # becomes rank 0 and broadcasts it: the job goes on from step 0 with epoch 1's counters.
    sc = load("hosts_added_and_removed", new_host_order="sorted", discovery={"schedule": [
        {"epoch": 0, "hosts": ["localhost:2"]}, {"hosts": ["localhost:2", "127.0.0.1:2"]}]},
        exit_schedule=[{"epoch": 1, "batch": 0, "ranks": [0, 1]}])
    run = simulate_run(sc)
    joined = [e for e in run.of("sync") if e.host == "127.0.0.1"]
    assert [(e.get("round"), e.get("root"), e.get("step")) for e in joined] == [
        (2, "localhost", 10), (3, "127.0.0.1", 0)]
    (restore,) = [e for e in run.of("restore") if e.host == "127.0.0.1"]
    assert restore.get("step") == 0 and restore.get("reason") == "CollectiveFailed"
    (done,) = run.of("job_done")
    assert done.get("step") == 20
    assert run.failed_checks == ["committed_progress"]


def test_an_internal_error_between_commits_rolls_back_to_the_last_commit() -> None:
    # Commits every 5 batches; rank 0 leaves at (1, 3), after steps 11..13: the survivors
    # restore step 10 (the last commit) and redo the three steps.
    run = simulate_run(load("single_rank_failure", batches_per_commit=5,
                            exit_schedule=[{"epoch": 1, "batch": 3, "ranks": [0]}]))
    (restore,) = run.of("restore")
    last_commit = [e.get("step") for e in run.of("commit") if e.t <= restore.t][-1]
    assert last_commit == 10 and restore.get("step") == 10
    redone = [e.get("step") for e in run.of("step") if e.proc == restore.proc and e.t > restore.t]
    assert redone[:3] == [11, 12, 13]
    assert run.metrics.outcome == "completed" and run.failed_checks == []


def test_a_notification_queued_before_a_failure_is_discarded_by_the_reset() -> None:
    # Rank 0 is told at 10 s that h3 was added, but its peers are stuck on a stopped worker
    # (start rank 3) until the Gloo timeout; the reset that follows its kill at 40 s takes
    # h3 in, and on_reset drops the queued message: no interrupt, no extra reset.
    hosts = ["localhost:2", "127.0.0.1:2"]
    data = raw("single_rank_failure")
    data["protocol"]["knobs"].update(
        new_host_order="sorted", max_np=None,
        exit_schedule=[{"epoch": 1, "batch": 0, "ranks": [3], "mode": "silent"}],
        discovery={"schedule": [{"until_s": 10.0, "hosts": hosts},
                                {"hosts": [*hosts, "h3:1"]}]})
    data["cluster"]["hosts"] = ["localhost", "127.0.0.1", "h3"]
    data.update(expect={}, time_limit=200,
                faults=[{"type": "crash_process", "proc": "localhost/w1.4", "at": 40.0}])
    run = simulate_run(parse_scenario(data))
    (note,) = run.of("hvd_notified")
    assert note.proc == "127.0.0.1/w0.1" and 10.0 <= note.t < 11.0
    assert [e.get("reason") for e in run.of("restore")] == ["CollectiveTimeout"] * 2
    _, second = run.of("hvd_assign")
    assert 40.0 <= second.t < 40.1 and "h3:0" in second.get("ranks")
    assert run.of("hvd_interrupt") == [] and run.metrics.world_sizes == [4, 3]
    assert run.metrics.outcome == "completed"


def test_a_gloo_error_in_reinit_aborts_the_survivor_with_134_by_default() -> None:
    run = simulate_run(load("survivors_abort_in_reinit_after_peer_died"))
    (abort,) = run.of("hvd_abort")
    assert abort.proc == "h2/w0.2" and "init timed out" in abort.get("error")
    (code,) = [e.get("code") for e in run.of("proc_exit") if e.proc == "h2/w0.2"]
    assert code == 134 and run.metrics.outcome == "failed"
    # every slot of the new round failed (the dead peer and the aborted survivor): upstream's
    # _on_workers_recorded stops on that count before its blacklisting, so no host is
    # blacklisted at that trip (the next test: beside a READY slot it is)
    last = run.of("hvd_trip")[-1]
    assert last.get("decision") == "all_failed" and last.get("blacklist") == []
    assert all(e.t < last.t for e in run.of("hvd_blacklist"))


def test_a_survivor_aborted_in_reinit_beside_a_ready_slot_gets_its_host_blacklisted() -> None:
    # 127.0.0.1's slot 1, its session dead, is counted twice in round 1's barrier; localhost's
    # slot 1 asks only after the trip and is recorded READY in round 2, so slot 0's Gloo
    # rendezvous of round 2 waits for it until the Gloo timeout and aborts (134); that
    # FAILURE trips round 2 beside the READY slot and the driver blacklists localhost
    run = simulate_run(load("ssh_sessions_killed_while_workers_live"))
    (abort,) = [e for e in run.of("hvd_abort") if e.host == "localhost"]
    assert abort.get("error") == "CollectiveTimeout: group hvd2: init timed out"
    (code,) = [e.get("code") for e in run.of("proc_exit") if e.proc == abort.proc]
    assert code == 134
    last = run.of("hvd_trip")[-1]
    assert last.get("states") == {"localhost:1": "READY", "localhost:0": "FAILURE"}
    assert last.get("blacklist") == ["localhost"] and last.t > abort.t
    assert [e.get("target") for e in run.of("hvd_blacklist")] == ["127.0.0.1", "localhost"]
    assert run.metrics.outcome == "failed"


def test_with_reinit_error_reset_the_survivor_resets_again_and_finishes() -> None:
    run = simulate_run(load("survivors_abort_in_reinit_after_peer_died", reinit_error="reset"))
    (again,) = run.of("hvd_reinit_failed")
    assert again.proc == "h2/w0.2" and run.of("hvd_abort") == []
    assert [t.get("decision") for t in run.of("hvd_trip")] == ["reset", "reset", "success"]
    assert run.metrics.outcome == "completed" and run.failed_checks == []


def test_reset_callbacks_run_after_the_new_world_formed_and_before_the_sync() -> None:
    run = simulate_run(load("reset_callback_after_failure"))
    (cb,) = run.of("reset_callback")
    (sync,) = [e for e in run.of("sync") if e.proc == cb.proc and e.t >= cb.t]
    (ready,) = [e for e in run.of("rdzv_done") if e.proc == cb.proc and e.get("round") == 2]
    assert ready.t <= cb.t <= sync.t and cb.get("size") == 2 and cb.get("round") == 2
    assert (cb.get("step"), cb.get("digest")) == (sync.get("step"), sync.get("digest"))


def test_a_fresh_ranks_reset_callback_reads_its_own_restored_model() -> None:
    sc = load("reset_callback_sees_pre_sync_state")
    run = simulate_run(sc, sc.seed)
    stale = [e for e in run.of("reset_callback") if e.get("step") == 0]
    assert [e.host for e in stale] == ["127.0.0.1"]
    assert "reset_callback_state" in run.failed_checks
