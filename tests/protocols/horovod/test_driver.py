"""The elastic driver's behaviours (upstream's test_elastic_driver.py), each observed in the
trace of a simulated job: assignment stability, failures before the rendezvous, waiting
for slots and hosts, shutdown on success, whole-host blacklisting, who is notified and
when, host order, update classification, discovery failures."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sim.scenario import parse_scenario
from elastic_sim.trace import TraceEvent
from elastic_sim.world import WAKE_LATENCY
from tests.protocols.horovod.util import Run, load, raw, simulate_run

BOTH = ["localhost:2", "127.0.0.1:2"]


def ranks(ev: TraceEvent) -> dict[str, int]:
    out: dict[str, int] = ev.get("ranks")
    return out


def test_surviving_slots_keep_their_ranks_when_hosts_are_added() -> None:
    first, second, third = simulate_run(load("hosts_added_and_removed")).of("hvd_assign")
    assert ranks(first) == {"localhost:0": 0, "localhost:1": 1}
    assert ranks(second) == {"localhost:0": 0, "localhost:1": 1, "127.0.0.1:0": 2,
                             "127.0.0.1:1": 3}
    assert second.get("spawn") == ["127.0.0.1:0", "127.0.0.1:1"]
    # only the removed host's slots go; the survivors are not respawned
    assert ranks(third) == {"127.0.0.1:0": 0, "127.0.0.1:1": 1} and third.get("spawn") == []


def test_a_host_failing_before_its_first_batch_is_dropped_and_ranks_compacted() -> None:
    sc = load("single_rank_failure", new_host_order="sorted",
              exit_schedule=[{"epoch": 0, "batch": 0, "ranks": [0, 1]}])
    run = simulate_run(sc)
    first, second = run.of("hvd_assign")
    assert ranks(first) == {"127.0.0.1:0": 0, "127.0.0.1:1": 1, "localhost:0": 2,
                            "localhost:1": 3}
    assert ranks(second) == {"localhost:0": 0, "localhost:1": 1}
    assert [e.get("target") for e in run.of("hvd_blacklist")] == ["127.0.0.1"]
    assert run.epoch_logs("size", "start_rank") == [(2, 2), (2, 2), (2, 2)]


def test_the_job_waits_for_np_slots_before_starting() -> None:
    # np, not min_np: later rounds would settle for two slots, the first one waits for four
    sc = load("single_rank_failure", np=4, min_np=2, exit_schedule=[], discovery={
        "schedule": [{"until_s": 3.0, "hosts": ["localhost:2"]}, {"hosts": BOTH}]})
    run = simulate_run(sc)
    (assign,) = run.of("hvd_assign")
    assert assign.t >= 3.0 and assign.get("world_size") == 4
    assert run.metrics.outcome == "completed"


def test_the_job_waits_for_min_start_hosts_even_with_enough_slots() -> None:
    sched = {"schedule": [{"until_s": 2.0, "hosts": ["localhost:2"]}, {"hosts": BOTH}]}
    one = simulate_run(load("single_rank_failure", exit_schedule=[], discovery=sched))
    two = simulate_run(load("single_rank_failure", exit_schedule=[], discovery=sched,
                            min_start_hosts=2))
    assert one.of("hvd_assign")[0].t < 1.0 and one.of("hvd_assign")[0].get("world_size") == 2
    assert two.of("hvd_assign")[0].t >= 2.0 and two.of("hvd_assign")[0].get("world_size") == 4


def test_waiting_for_slots_times_out_after_the_elastic_timeout() -> None:
    sc = load("single_rank_failure", np=6, min_np=6, max_np=None, elastic_timeout=5,
              exit_schedule=[])
    run = simulate_run(sc)
    (failed,) = run.of("job_failed")
    assert "Timed out waiting for minimum number of slots" in failed.get("error")
    assert 5.0 <= failed.t < 6.0 and run.of("hvd_assign") == []


def test_the_first_success_stops_the_job_and_the_others_are_killed() -> None:
    sc = load("single_rank_failure", exit_schedule=[
        {"epoch": 1, "batch": 0, "ranks": [1], "mode": "exit0"}])
    run = simulate_run(sc)
    trip = run.of("hvd_trip")[-1]
    assert trip.get("decision") == "success"
    assert sorted(trip.get("states").values()) == ["READY", "READY", "READY", "SUCCESS"]
    workers = [e for e in run.of("proc_exit") if "/w" in e.proc]
    # the others are terminated, or abort when the stopped server fails their request
    codes = [e.get("code") for e in workers]
    assert len(codes) == 4 and codes.count(0) == 1
    assert all(c in (-15, 134) for c in codes if c != 0)
    (failed,) = run.of("job_failed")
    assert "non-zero status" in failed.get("error")


def test_one_failed_slot_blacklists_and_kills_its_whole_host() -> None:
    run = simulate_run(load("single_rank_failure"))
    failed_host = next(e.host for e in run.of("hvd_scheduled_exit"))
    (bl,) = run.of("hvd_blacklist")
    assert bl.get("target") == failed_host and bl.get("kill") is True
    ignored = [e.get("slot") for e in run.of("hvd_exit_ignored")]
    assert ignored == [f"{failed_host}:1"]
    assert all(not s.startswith(failed_host) for s in ranks(run.of("hvd_assign")[1]))


def rank0_at(run: Run, t: float) -> str:
    """The process holding rank 0 of the latest world formed by time ``t``."""
    inits = [e for e in run.of("group_init") if e.t <= t and e.get("rank") == 0]
    return inits[-1].proc


def test_only_the_current_rank_zero_is_notified() -> None:
    run = simulate_run(load("hosts_added_and_removed"))
    notes = run.of("hvd_notify")
    assert [n.get("update") for n in notes] == ["added", "removed"]
    assert [n.get("to") for n in notes] == [rank0_at(run, n.t) for n in notes]
    # and no other worker ever receives one
    assert [e.proc for e in run.of("hvd_notified")] == [n.get("to") for n in notes]
    interrupts = run.of("hvd_interrupt")
    assert len(interrupts) == 2 + 4  # every rank interrupts at the same commit


def test_workers_are_notified_even_when_fewer_than_min_np_slots_remain() -> None:
    run = simulate_run(load("spark_all_hosts_lost"))
    gone = [e for e in run.of("hvd_discovery") if e.get("hosts") == []]
    (note,) = run.of("hvd_notify")
    assert gone and note.t == gone[0].t and note.get("update") == "removed"
    assert run.of("hvd_resume_failed")


def test_no_notification_when_the_assignment_does_not_change() -> None:
    run = simulate_run(load("spark_unused_hosts_added_and_removed"))
    assert [e.get("update") for e in run.of("hvd_discovery")] == ["added", "added", "removed"]
    assert run.of("hvd_notify") == [] and len(run.of("hvd_assign")) == 1


def test_updates_are_classified_in_the_trace() -> None:
    sched: dict[str, Any] = {"schedule": [
        {"epoch": 0, "hosts": ["h1:1", "h2:1"]}, {"epoch": 1, "hosts": ["h2:1", "h3:1"]},
        {"hosts": ["h3:1", "h4:1"]}]}
    data = raw("spark_auto_scale_down_by_discovery")
    data["protocol"]["knobs"].update(np=2, min_np=2, discovery=sched)
    data["cluster"]["hosts"] = ["h1", "h2", "h3", "h4"]
    data["expect"] = {"outcome": "completed"}
    run = simulate_run(parse_scenario(data))
    assert [e.get("update") for e in run.of("hvd_discovery")] == ["added", "mixed", "mixed"]
    assert run.metrics.world_sizes == [2, 2, 2] and run.metrics.outcome == "completed"
    assert run.epoch_logs("hostname") == [("h1",), ("h2",), ("h3",)]


def test_surviving_hosts_keep_their_order_so_rank_zero_stays_put() -> None:
    run = simulate_run(load("spark_auto_scale_up", new_host_order="random"), seed=5)
    orders = [list(ranks(e)) for e in run.of("hvd_assign")]
    assert orders[0] == ["h1:0"] and orders[1][0] == "h1:0" and orders[2][:2] == orders[1]


def test_an_initial_discovery_failure_ends_the_job_but_later_ones_are_ignored() -> None:
    first = simulate_run(load("hosts_added_and_removed", discovery={
        "schedule": [{"hosts": ["localhost:2"]}], "failures": [{"poll": 1}]}))
    # the discovery thread dies with the script's error; horovodrun fails with the
    # shutdown seen by its wait for slots
    (error,) = first.of("hvd_discovery_error")
    assert error.get("first") is True and "discovery script failed" in error.get("error")
    (failed,) = first.of("job_failed")
    assert failed.get("error") == "Job has been shutdown, see above error messages for details."
    assert not any("/w" in e.proc for e in first.of("proc_start"))
    later = simulate_run(load("hosts_added_and_removed", discovery={
        "schedule": [{"hosts": ["localhost:2"]}], "failures": [{"poll": 3}]}))
    assert [e.get("first") for e in later.of("hvd_discovery_error")] == [False]
    assert later.metrics.outcome == "completed" and later.of("job_failed") == []


def test_a_hanging_discovery_script_freezes_the_membership() -> None:
    hung = simulate_run(load("hosts_added_and_removed", discovery_wait=0, discovery={
        **load("hosts_added_and_removed").knobs()["discovery"],
        "failures": [{"poll": 100, "mode": "hang", "hang_s": 30.0}]}))
    assert [e.get("poll") for e in hung.of("hvd_discovery")] == [1]
    assert hung.epoch_logs("size", "hostname") == [(2, "localhost")] * 3
    assert hung.metrics.outcome == "completed" and hung.of("hvd_notify") == []


def test_a_change_before_rank_zero_registers_is_never_delivered() -> None:
    # Rank 0 registers its notification service when it enters the run wrapper, after the
    # start-up latency; a change seen before that is skipped and never re-sent, so a later
    # removal of the only old host leaves no host to broadcast the state from.
    run = simulate_run(load("ray_poll_schedule", discovery={"schedule": [
        {"until_poll": 10, "hosts": ["h1:2"]},
        {"until_poll": 30, "hosts": ["h1:2", "h2:1", "h3:1"]}, {"hosts": ["h2:1"]}]}))
    added = run.of("hvd_discovery")[1]
    registered = run.of("group_ready")[0]
    assert added.get("update") == "added" and added.t < registered.t
    assert [n.get("update") for n in run.of("hvd_notify")] == ["removed"]
    (failed,) = run.of("hvd_resume_failed")
    assert "No hosts from previous set remaining" in failed.get("error")
    assert run.metrics.outcome == "failed"


def test_random_discovery_keeps_every_world_within_its_bounds() -> None:
    for seed in range(3):
        run = simulate_run(load("ray_random_discovery"), seed)
        sizes = run.metrics.world_sizes
        assert all(2 <= s <= 4 for s in sizes) and len(sizes) >= 3
        assert all(2 <= len(e.get("hosts")) <= 4 for e in run.of("hvd_discovery"))
        assert len(run.of("hvd_assign")) == len(sizes)
        assert run.metrics.outcome == "completed" and run.failed_checks == []


def hung_rank0(*faults: dict[str, Any]) -> Run:
    """single_rank_failure with rank 0 (on 127.0.0.1, sorted order) stopped at (1, 0)
    (exit mode ``silent``: peers see it at the Gloo timeout)."""
    data = raw("single_rank_failure")
    data["protocol"]["knobs"].update(exit_mode="silent", new_host_order="sorted")
    data.update(expect={}, faults=list(faults), time_limit=200)
    return simulate_run(parse_scenario(data))


def test_killing_a_hung_worker_lets_the_barrier_trip() -> None:
    run = hung_rank0({"type": "crash_process", "proc": "127.0.0.1/w0.1", "at": 40.0})
    trip = run.of("hvd_trip")[0]
    assert 40.0 <= trip.t < 40.01 and trip.get("decision") == "reset"
    assert trip.get("states") == {"localhost:0": "READY", "localhost:1": "READY",
                                  "127.0.0.1:1": "READY", "127.0.0.1:0": "FAILURE"}
    assert run.epoch_logs("size", "start_rank") == [(4, 0), (2, 2), (2, 2)]


def test_a_failure_overrides_a_waiting_ready_and_breaks_the_barrier() -> None:
    run = hung_rank0({"type": "crash_process", "proc": "localhost/w0.3", "at": 40.0},
                     {"type": "crash_process", "proc": "127.0.0.1/w0.1", "at": 45.0})
    (err,) = run.of("hvd_rank_and_size_error")
    assert 40.0 <= err.t < 40.01 and err.get("error") == "State READY overridden by FAILURE"
    (trip,) = run.of("hvd_trip")
    assert 45.0 <= trip.t < 45.01 and trip.get("decision") == "all_blacklisted"
    assert trip.get("states")["localhost:0"] == "FAILURE"


def test_a_crashed_worker_host_never_reaches_the_barrier_and_the_job_hangs() -> None:
    # No heartbeats: a host that dies takes its task service and workers with it; their
    # exits are never reported, so the reset barrier waits for them forever.
    data = raw("single_rank_failure")
    data["protocol"]["knobs"]["exit_schedule"] = []
    data.update(expect={}, time_limit=200,
                faults=[{"type": "crash", "host": "127.0.0.1", "at": 3.0}])
    run = simulate_run(parse_scenario(data))
    assert {e.proc for e in run.of("coll_fail")} == {"localhost/w0.3", "localhost/w1.4"}
    assert run.of("hvd_trip") == [] and run.result.hung


def test_a_notification_to_a_dead_rank_zero_is_refused_at_once_and_frees_the_lock() -> None:
    # Rank 0 (127.0.0.1/w0.1, sorted order) has exited but the reset waits for a hung peer,
    # so rank 0 is still the recipient. Its host's kernel refuses the connection at once:
    # the three attempts fail in no time and the next discovery change is not held up.
    hosts = ["localhost:2", "127.0.0.1:2"]
    data = raw("single_rank_failure")
    data["protocol"]["knobs"].update(
        new_host_order="sorted", max_np=None,
        exit_schedule=[{"epoch": 1, "batch": 0, "ranks": [0]},
                       {"epoch": 1, "batch": 0, "ranks": [3], "mode": "hang"}],
        discovery={"schedule": [{"until_s": 6.0, "hosts": hosts},
                                {"until_s": 12.0, "hosts": [*hosts, "h3:1"]},
                                {"hosts": [*hosts, "h3:1", "h4:1"]}]})
    data["cluster"]["hosts"] = ["localhost", "127.0.0.1", "h3", "h4"]
    data.update(expect={}, time_limit=60)
    run = simulate_run(parse_scenario(data))
    (gone,) = [e for e in run.of("proc_exit") if e.proc == "127.0.0.1/w0.1"]
    notes, failed = run.of("hvd_notify"), run.of("hvd_notify_failed")
    assert [n.get("to") for n in notes] == ["127.0.0.1/w0.1"] * 2 and gone.t < notes[0].t
    assert [f.get("error") for f in failed] == ["refused", "refused"]
    assert all(f.t - n.t < 0.1 for n, f in zip(notes, failed, strict=True))
    assert [round(e.t) for e in run.of("hvd_discovery")] == [0, 6, 12]
    assert run.of("hvd_lock_held") == [] and run.of("hvd_trip") == []


def test_max_np_caps_the_world_and_an_idle_host_is_not_a_previous_host() -> None:
    # max_np = 2 with 4 slots: only the first host's slots get ranks (and processes). When
    # discovery then drops that host, the idle host held no ranks, so no previous host
    # remains to broadcast the state from and the reset fails.
    sc = load("single_rank_failure", max_np=2, new_host_order="sorted", exit_schedule=[],
              discovery={"schedule": [{"until_s": 3.0, "hosts": ["127.0.0.1:2", "localhost:2"]},
                                      {"hosts": ["localhost:2"]}]})
    run = simulate_run(sc)
    (assign,) = run.of("hvd_assign")
    assert ranks(assign) == {"127.0.0.1:0": 0, "127.0.0.1:1": 1}
    assert assign.get("spawn") == ["127.0.0.1:0", "127.0.0.1:1"]
    (failed,) = run.of("hvd_resume_failed")
    assert "No hosts from previous set remaining" in failed.get("error")
    assert run.metrics.world_sizes == [2] and run.metrics.outcome == "failed"


def slot_wait_after_a_failure(*faults: dict[str, Any]) -> Run:
    """min_hosts_timeout with the default 600 s elastic timeout: after rank 0's host is
    blacklisted the reset waits for 4 slots; at poll 2000 (about 20 s) discovery adds h3,
    which wakes the wait but is still one slot short."""
    hosts = ["localhost:2", "127.0.0.1:2"]
    data = raw("min_hosts_timeout")
    data["protocol"]["knobs"].update(
        elastic_timeout=600, new_host_order="sorted", max_np=None,
        discovery={"schedule": [{"until_poll": 2000, "hosts": hosts},
                                {"hosts": [*hosts, "h3:1"]}]})
    data["cluster"]["hosts"] = ["localhost", "127.0.0.1", "h3"]
    data.update(expect={}, time_limit=900, faults=list(faults))
    return simulate_run(parse_scenario(data))


@pytest.mark.slow
def test_the_elastic_timeout_runs_on_the_drivers_wall_clock() -> None:
    # upstream's Timeout compares time.time() with its deadline each time the wait wakes:
    # a forward step of the driver host's clock ends the slot wait at the next wake-up
    steady = slot_wait_after_a_failure()
    jumped = slot_wait_after_a_failure(
        {"type": "clock_jump", "host": "localhost", "delta": 1000.0, "at": 10.0})
    for run in (steady, jumped):
        (added,) = [e for e in run.of("hvd_discovery") if e.get("hosts")[-1] == "h3:1"]
        assert 19.0 < added.t < 21.0
    (late,) = steady.of("hvd_resume_failed")
    (early,) = jumped.of("hvd_resume_failed")
    assert "Timed out waiting for minimum number of slots" in early.get("error")
    assert 600.0 < late.t < 604.0 and 19.0 < early.t < 21.0


def test_fixed_hosts_need_two_hosts_or_the_launch_refuses() -> None:
    run = simulate_run(load("fault_tolerance_without_scaling",
                            discovery={"hosts": ["localhost:2", "localhost:2"]}))
    (failed,) = run.of("job_failed")
    assert failed.get("error") == "Cannot run in fault tolerance mode with fewer than 2 hosts."
    assert not any("/w" in e.proc for e in run.of("proc_start"))
    assert run.of("hvd_discovery") == [] and run.metrics.outcome == "failed"


def test_a_failure_recorded_as_the_barrier_action_starts_deadlocks_the_driver() -> None:
    # with its tie seed, the killed slot's record_failure passes _action_event.wait() before
    # the last READY's action clears it: it then holds the registry lock in barrier.reset()
    # (needing the barrier's condition) while the action holds the condition and wants the
    # registry lock: no new assignment, no stop, ever
    sc = load("failure_during_barrier_action_deadlocks_driver")
    run = simulate_run(sc, sc.seed)
    (trip,) = run.of("hvd_trip")
    assert trip.get("decision") == "reset"
    assert [e for e in run.of("hvd_assign") if e.t >= trip.t] == []
    assert run.of("hvd_stop") == [] and run.result.hung


def test_a_failure_recorded_as_the_action_stops_the_job_waits_in_the_spent_barrier() -> None:
    # found by explore --ties: the failure waited in _action_event.wait() while the trip
    # stopped the job; it then resets the barrier and waits in it for parties that never
    # come, and horovodrun joins that spawner thread for good
    sc = load("failure_recorded_as_the_job_stops_hangs_horovodrun")
    run = simulate_run(sc, sc.seed)
    (trip,) = run.of("hvd_trip")
    (stop,) = run.of("hvd_stop")
    assert trip.get("decision") == "all_blacklisted" and stop.t == trip.t
    after_stop = run.events[run.events.index(stop) + 1:]
    late = [(e.get("slot"), e.get("state")) for e in after_stop if e.kind == "hvd_record"]
    assert late == [("127.0.0.1:0", "FAILURE")]
    assert run.result.hung
    assert not any(e.proc == "localhost/main" for e in run.of("proc_exit"))
    # every worker has exited: nothing the driver waits for can still come
    workers = {e.proc for e in run.of("proc_start") if "/w" in e.proc}
    assert workers == {e.proc for e in run.of("proc_exit") if "/w" in e.proc}
    # the other order of that instant: slot 0's failure first overrides its READY, and the
    # job fails instead of hanging
    data = raw("failure_recorded_as_the_job_stops_hangs_horovodrun")
    del data["tie_seed"]
    other = simulate_run(parse_scenario(data), data["seed"])
    assert not other.result.hung


def test_in_arrival_order_the_failure_overrides_the_ready_and_the_job_fails() -> None:
    data = raw("failure_during_barrier_action_deadlocks_driver")
    del data["tie_seed"]
    run = simulate_run(parse_scenario(data), data["seed"])
    (err,) = run.of("hvd_rank_and_size_error")
    assert err.get("error") == "State READY overridden by FAILURE"
    (trip,) = run.of("hvd_trip")
    assert trip.get("decision") == "all_blacklisted" and run.metrics.outcome == "failed"


def test_a_notification_to_a_gone_rank_zero_host_holds_the_discovery_lock_and_the_reset() -> None:
    run = simulate_run(load("notification_to_dead_coordinator_holds_reset"))
    (note,) = run.of("hvd_notify")
    (failed,) = run.of("hvd_notify_failed")
    assert note.get("to") == "127.0.0.1/w0.1" and failed.get("error") == "timeout"
    assert abs(failed.t - note.t - 3 * (127.0 + WAKE_LATENCY)) < 1e-6
    held = [e for e in run.of("hvd_lock_held") if e.get("held_s") > 300]
    assert held and held[0].get("owner") == "discovery"
    second = run.of("hvd_assign")[1]
    assert second.t >= failed.t and "h3:0" in second.get("ranks")
