"""Spawns, exit statuses and rank_and_size requests travel over modelled TCP connections
(the ssh client, the HTTP GET), not as fire-and-forget messages: a lost segment is
retransmitted, a connect to a dead or unreachable host fails after the connect timeout, a
dead session is noticed by TCP keepalive, and the kill of a host ends its spawners on the
driver's side. Most tests replay a divergence the exploration campaign found
(scenarios/found/README.md, findings 4-8) and assert upstream's outcome; the last ones reset
each kind of request in flight (ssh, rank_and_size, notification, registration) and assert
upstream's client semantics for it."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sim.protocols.horovod.conn import SYN_RTO
from elastic_sim.scenario import parse_scenario
from elastic_sim.world import WAKE_LATENCY
from tests.protocols.horovod.util import Run, load, raw, simulate_run

DRIVER = "localhost/main"


def driver_exit(run: Run) -> int:
    """The driver process's exit code (horovodrun's)."""
    (ev,) = [e for e in run.of("proc_exit") if e.proc == DRIVER]
    code: int = ev.get("code")
    return code


def test_a_spawn_to_a_dead_host_fails_after_the_connect_timeout_and_the_job_fails() -> None:
    # finding 4: 127.0.0.1 is down before the first spawn
    run = simulate_run(load("found_spawn_to_dead_host_fails"))
    failed = run.of("hvd_ssh_failed")
    assert [(e.get("to"), e.get("error")) for e in failed] == [
        ("127.0.0.1/main", "connect timed out")] * 2
    # Linux: 6 SYN retries, 127 s; the waiting thread wakes WAKE_LATENCY late
    assert all(abs(e.t - (127.0 + WAKE_LATENCY)) < 1e-9 for e in failed)
    (trip,) = run.of("hvd_trip")
    assert trip.get("decision") == "all_failed"
    assert trip.get("states")["127.0.0.1:0"] == trip.get("states")["127.0.0.1:1"] == "FAILURE"
    assert run.metrics.outcome == "failed" and not run.result.hung
    assert driver_exit(run) == 1 and run.of("job_failed")


def test_a_shorter_connect_timeout_fails_the_spawn_sooner() -> None:
    run = simulate_run(load("found_spawn_to_dead_host_fails", connect_timeout=40.0))
    assert [round(e.t, 9) for e in run.of("hvd_ssh_failed")] == [40.0 + WAKE_LATENCY] * 2
    assert run.metrics.outcome == "failed"


def test_killing_a_dead_hosts_workers_returns_within_the_grace_and_the_driver_exits_0() -> None:
    # finding 6: the trip blacklists 127.0.0.1 after it crashed with a worker still running
    run = simulate_run(load("found_kill_of_dead_host_returns"))
    (bl,) = run.of("hvd_blacklist")
    assert bl.get("target") == "127.0.0.1" and bl.get("kill") is True
    (ignored,) = run.of("hvd_exit_ignored")
    assert ignored.get("slot") == "127.0.0.1:1" and ignored.get("code") == -9
    # kill_grace (a sleep, so plus the wake latency): SIGKILL of the local shell
    assert abs(ignored.t - (bl.t + 5.0 + WAKE_LATENCY)) < 1e-9
    assert run.of("hvd_job_succeeded") and driver_exit(run) == 0
    assert run.metrics.outcome == "completed" and not run.result.hung


def test_a_spawn_lost_in_a_short_partition_is_retransmitted_and_only_delays_the_start() -> None:
    # finding 7: a 1 ms partition at 0 s eats the two spawns for 127.0.0.1
    base = simulate_run(load("single_rank_failure"))
    run = simulate_run(load("found_spawn_through_short_partition"))
    logs = ("epoch", "size", "start_rank", "hostname", "rendezvous")
    assert run.epoch_logs(*logs) == base.epoch_logs(*logs)
    first, base_first = run.of("hvd_trip")[0], base.of("hvd_trip")[0]
    assert abs(first.t - base_first.t - 1.0) < 0.01  # the SYN's first retransmission
    assert run.metrics.outcome == "completed"


def test_a_rank_and_size_request_cut_off_by_a_partition_gets_through_after_the_heal() -> None:
    # finding 8: 127.0.0.1 is cut off from the driver 2.617-36.54 s while slot 1 resets
    run = simulate_run(load("found_rank_and_size_through_partition"))
    partition = run.of("fault")[0]
    heal = partition.t + 33.923
    trip = run.of("hvd_trip")[0]
    assert heal < trip.t < partition.t + 127.0
    assert trip.get("states")["127.0.0.1:1"] == "READY"
    assert trip.get("decision") == "reset" and trip.get("blacklist") == ["127.0.0.1"]
    assert run.metrics.outcome == "completed" and not run.result.hung


def test_a_request_whose_answer_never_comes_aborts_after_three_failed_connects() -> None:
    # 127.0.0.1 is cut off from the driver for 90 s just before its slot 1 asks for its new
    # rank: 3 connects of connect_timeout each fail, each followed by 0.5 s (PerformHTTP
    # sleeps after every failed try, the last one too); then the worker aborts
    data = raw("single_rank_failure")
    data["protocol"]["knobs"]["connect_timeout"] = 10.0
    data.update(expect={}, time_limit=100,
                faults=[{"type": "partition", "groups": [["127.0.0.1"], ["localhost"]],
                         "at": 2.6, "duration": 90.0}])
    run = simulate_run(parse_scenario(data))
    aborts = [e for e in run.of("hvd_abort") if e.host == "127.0.0.1"]
    assert [e.get("error") for e in aborts] == [
        "RemovedFromJob: rank_and_size: HTTP request failed (connect timed out after 10.0s)"]
    # it asks once its collective failed on rank 0's exit (after the cut began)
    (failed,) = [e for e in run.of("coll_fail") if e.proc == aborts[0].proc]
    assert 2.6 < failed.t
    assert failed.t + 3 * 10.0 + 3 * 0.5 <= aborts[0].t < failed.t + 3 * 10.0 + 3 * 0.5 + 0.1


def test_duplicate_rank_and_size_requests_are_recorded_once() -> None:
    # the driver's host freezes 2.572-5.572 s, while the survivors ask for their new ranks:
    # each request and its retransmissions (after 1 s and 2 s more) queue up and arrive
    # together when it resumes; each slot must record READY once, and the job goes on as
    # without the fault
    data: dict[str, Any] = raw("single_rank_failure")
    data.update(expect={}, faults=[{"type": "hang", "host": "localhost", "at": 2.572,
                                    "duration": 3.0}])
    run = simulate_run(parse_scenario(data))
    trip = run.of("hvd_trip")[0]
    assert trip.get("decision") == "reset" and trip.get("states") == {
        "127.0.0.1:0": "FAILURE", "127.0.0.1:1": "READY", "localhost:0": "READY",
        "localhost:1": "READY"}
    assert run.of("hvd_rank_and_size_error") == []
    assert run.epoch_logs("size", "start_rank") == [(4, 0), (2, 2), (2, 2)]
    assert run.metrics.outcome == "completed"


def test_a_dead_worker_host_is_detected_when_the_ssh_keepalive_gives_up() -> None:
    # finding 5, with keepalive shortened to 60 s + 3 x 5 s (Linux: 7200 s + 9 x 75 s)
    run = simulate_run(load("worker_host_crash_keepalive"))
    failed = run.of("hvd_ssh_failed")
    assert [e.get("error") for e in failed] == ["keepalive timed out"] * 2
    assert all(74.9 < e.t < 75.1 for e in failed)  # connected at ~0 s, then 60 + 3 x 5
    trip = run.of("hvd_trip")[0]
    assert trip.t == failed[-1].t and trip.get("blacklist") == ["127.0.0.1"]
    assert run.epoch_logs("size", "hostname") == [(2, "localhost")] * 3


def test_with_linux_keepalive_defaults_the_dead_host_blocks_the_job_for_2_h_11_min() -> None:
    # 7200 s idle + 9 probes x 75 s, counted from the connect at ~0 s; a 1 s discovery
    # period keeps the 2 h run cheap
    defaults = {"keepalive_time": None, "keepalive_interval": None, "keepalive_probes": None}
    early = simulate_run(load("worker_host_crash_keepalive", **defaults))
    assert early.of("hvd_trip") == [] and early.result.hung  # time limit 300 s
    sc = load("worker_host_crash_keepalive", discovery_period=1.0, **defaults)
    run = simulate_run(sc.model_copy(update={"time_limit": 9000.0}))
    failed = run.of("hvd_ssh_failed")
    assert [e.get("error") for e in failed] == ["keepalive timed out"] * 2
    assert all(7874.9 < e.t < 7875.1 for e in failed)
    assert run.epoch_logs("size", "hostname") == [(2, "localhost")] * 3
    assert run.metrics.outcome == "completed"


def _first_syn_after(opened: float, heal: float) -> float:
    """When the first SYN at or after ``heal`` leaves: SYNs go at ``opened`` + 0, 1, 3, 7,
    15, 31, 63 s (the first retransmission after 1 s, each one doubling)."""
    at, rto = opened, SYN_RTO
    while at < heal:
        at, rto = at + rto, 2 * rto
    return at


def test_a_notification_cut_off_for_30_s_arrives_with_the_first_syn_after_the_heal() -> None:
    run = simulate_run(load("notification_through_partition"))
    (cut,) = [e for e in run.of("fault") if e.get("phase") == "start"]
    (heal,) = [e for e in run.of("fault") if e.get("phase") == "heal"]
    (notify,) = run.of("hvd_notify")
    (notified,) = run.of("hvd_notified")
    assert cut.t < notify.t < heal.t and heal.t - cut.t == 30.0
    syn = _first_syn_after(notify.t, heal.t)
    assert syn - notify.t == 31.0
    # then one round trip for the handshake and the request: well under a second, not
    # the 127 s connect timeout of a lost attempt
    assert syn < notified.t < syn + 0.01
    assert run.of("hvd_notify_failed") == []
    assert run.epoch_logs("size")[-1] == (2,) and run.metrics.outcome == "completed"


def test_a_request_reaches_its_server_only_once_the_handshake_completes() -> None:
    # only localhost -> drv is cut: the SYNs reach rank 0's host, its SYN-ACKs are lost,
    # so the request itself is never sent until a SYN-ACK gets through after the heal
    # (a request that rode on the SYN would be handled at once and only its ack lost)
    data = raw("notification_through_partition")
    data["faults"] = [{"id": "cut", "type": "one_way_partition", "src": ["localhost"],
                       "dst": ["drv"], "at": 2.9, "duration": 30.0}]
    run = simulate_run(parse_scenario(data))
    (notify,) = run.of("hvd_notify")
    (notified,) = run.of("hvd_notified")
    syn = _first_syn_after(notify.t, 2.9 + 30.0)
    assert syn < notified.t < syn + 0.01
    assert run.metrics.outcome == "completed"


def test_a_preempted_worker_hosts_sessions_close_at_once_and_the_job_goes_on() -> None:
    # the host's kernel lives through the preemption's grace: the ssh sessions to it close
    # when its processes die, so each spawner's ssh exits 255 at once (was: keepalive, 2 h)
    run = simulate_run(load("preempted_worker_host_seen_at_once"))
    (fault,) = run.of("fault")
    failed = run.of("hvd_ssh_failed")
    assert [e.get("error") for e in failed] == ["connection closed"] * 2
    assert all(e.t - fault.t < 0.001 for e in failed)
    trip = run.of("hvd_trip")[0]
    assert trip.t - fault.t < 0.2 and trip.get("blacklist") == ["127.0.0.1"]
    assert run.metrics.outcome == "completed" and not run.result.hung


def test_the_driver_host_restarted_runs_no_second_driver() -> None:
    # horovodrun dies with its host: the host's first process comes back as sshd only, and
    # the other host's workers, left without a driver, abort once their requests are refused
    sc = load("driver_host_restart_leaves_no_launcher")
    run = simulate_run(sc, sc.seed)
    (gone,) = run.of("hvd_launcher_gone")
    assert gone.get("incarnation") == 1
    assert [e for e in run.of("hvd_assign") if e.t > gone.t] == []
    aborts = run.of("hvd_abort")
    assert aborts and all("connection refused" in e.get("error") for e in aborts)
    assert not run.result.hung


def test_a_lossy_link_at_the_jobs_end_delays_the_shutdown_but_does_not_lose_it() -> None:
    # the driver's end-of-job shutdown of a task service travels over a connection
    data = raw("single_rank_failure")
    data.update(expect={}, faults=[{"type": "link", "a": "localhost", "b": "127.0.0.1",
                                    "at": 4.0, "duration": 20.0, "loss": 0.5}])
    run = simulate_run(parse_scenario(data))
    assert run.metrics.outcome == "completed" and not run.result.hung
    assert "127.0.0.1/main" in run.result.exit_codes


def test_a_task_service_cut_off_at_the_jobs_end_stops_after_the_heal() -> None:
    data = raw("single_rank_failure")
    data.update(expect={}, faults=[{"type": "isolate", "host": "127.0.0.1", "at": 4.7,
                                    "duration": 30.0}])
    run = simulate_run(parse_scenario(data))
    (stop,) = [e for e in run.of("proc_exit") if e.proc == "127.0.0.1/main"]
    assert 4.7 + 30.0 < stop.t < 4.7 + 127.0
    assert run.metrics.outcome == "completed" and not run.result.hung


def test_a_conn_reset_of_the_drivers_connections_fails_every_ssh_session() -> None:
    run = simulate_run(load("conn_reset_of_driver_connections_fails_job"))
    (fault,) = run.of("fault")
    failed = run.of("hvd_ssh_failed")
    assert len(failed) == 3 and {e.get("error") for e in failed} == {"connection closed"}
    assert all(e.t == fault.t for e in failed)
    (trip,) = run.of("hvd_trip")
    assert trip.get("decision") == "all_failed" and run.metrics.outcome == "failed"


# -- a conn_reset meets each of Horovod's request kinds with upstream's client semantics --


def _reset_run(http_attempts: int | None = None) -> Run:
    return simulate_run(load("conn_reset_of_a_rank_request_counts_a_slot_twice",
                             http_attempts=http_attempts))


def test_a_reset_rank_request_is_retried_and_its_slot_counted_twice_in_the_barrier() -> None:
    run = _reset_run()
    (fault,) = run.of("fault")
    # the ssh session to h2 ends at once (255, no retry): h2's slot records FAILURE
    (ssh,) = run.of("hvd_ssh_failed")
    assert ssh.t == fault.t and ssh.get("to") == "h2/main"
    h2 = [(e.get("rendezvous"), e.get("state"), e.t) for e in run.of("hvd_record")
          if e.get("slot") == "h2:0"]
    # the GET caught by the reset is tried again http_retry_delay (0.5 s) later, and the
    # driver waits it in the barrier as a second party of the same slot
    assert [(r, s) for r, s, _ in h2] == [(1, "READY"), (2, "FAILURE"), (2, "READY")]
    assert h2[2][2] - fault.t == pytest.approx(0.5, abs=0.01)
    trip = run.of("hvd_trip")[-1]
    assert trip.get("rendezvous") == 2 and trip.get("states") == {"h2:0": "FAILURE"}
    (kept,) = [c for c in run.checks if c.name == "healthy_hosts_kept"]
    assert [v.message for v in kept.violations] == [
        "the barrier of round 2 tripped with 1 of its 2 parties in it (h2:0); h2:0 counted "
        "twice; not in it: h3:0"]
    assert run.metrics.outcome == "failed" and run.unmet == []


def test_with_one_http_attempt_the_reset_rank_request_aborts_the_worker_instead() -> None:
    run = _reset_run(http_attempts=1)
    (fault,) = run.of("fault")
    (abort,) = [e for e in run.of("hvd_abort") if e.host == "h2"]
    assert abort.get("error") == ("RemovedFromJob: rank_and_size: HTTP request failed "
                                  "(connection reset)")
    assert abort.t == pytest.approx(fault.t + 0.5, abs=0.01)  # PerformHTTP sleeps after it
    assert [e.get("state") for e in run.of("hvd_record")
            if e.get("slot") == "h2:0" and e.get("rendezvous") == 2] == ["FAILURE"]


def _notified_job(attempts: int | None) -> Run:
    # h3 is discovered at 2 s; the driver tells rank 0 (h1's worker) and the reset between
    # h0 and h1 fires at that instant: the notification's first connection is reset
    data = raw("conn_reset_of_a_rank_request_counts_a_slot_twice")
    knobs = data["protocol"]["knobs"]
    knobs.pop("exit_schedule")
    knobs.update(np=2, discovery={"schedule": [{"until_s": 2.0, "hosts": ["h1:1", "h2:1"]},
                                               {"hosts": ["h1:1", "h2:1", "h3:1"]}]})
    if attempts is not None:
        knobs["notification_attempts"] = attempts
    data.update(expect={}, faults=[{"id": "notify-reset", "type": "conn_reset", "a": "h0",
                                    "b": "h1", "at": 0.0,
                                    "when": {"event": "hvd_notify", "host": "h0"}}])
    return simulate_run(parse_scenario(data))


def test_a_reset_notification_is_sent_again_and_reaches_rank_0() -> None:
    run = _notified_job(None)
    (notify,) = run.of("hvd_notify")
    assert notify.get("to") == "h1/w0.1"
    (fault,) = run.of("fault")
    assert fault.t == notify.t
    assert run.of("hvd_notify_failed") == []
    (got,) = run.of("hvd_notified")
    assert got.host == "h1" and got.t > fault.t


def test_with_one_notification_attempt_the_reset_notification_is_lost() -> None:
    run = _notified_job(1)
    (failed,) = run.of("hvd_notify_failed")
    assert failed.get("error") == "refused"
    assert run.of("hvd_notified") == []


def test_a_reset_registration_put_is_not_retried_and_the_worker_exits_1() -> None:
    # the reset of every connection of h0 as round 1 forms catches each worker's PUT of
    # its notification service (urllib, no retry)
    data = raw("conn_reset_of_a_rank_request_counts_a_slot_twice")
    data.update(expect={}, faults=[{"id": "put-reset", "type": "conn_reset", "a": "h0",
                                    "b": "*", "at": 0.0,
                                    "when": {"event": "rdzv_done", "match": {"round": 1}}}])
    run = simulate_run(parse_scenario(data))
    (fault,) = run.of("fault")
    exits = run.of("hvd_exit")
    assert sorted(e.host for e in exits) == ["h1", "h2", "h3"]
    assert {e.get("error") for e in exits} == {
        "Put data input KVStore server failed: connection refused"}
    assert all(e.t == fault.t and e.get("code") == 1 for e in exits)
