"""Each check passes a correct history and catches the violation it is named for,
pointing at the events that witness it."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sim.checks import (
    collective_sequence,
    committed_progress,
    epoch_isolation,
    limits,
    master_agreement,
    members_alive_at_completion,
    membership_agreement,
    no_pointless_reconfiguration,
    no_restart_loop,
    progress_after_faults,
    rank_validity,
    rendezvous_closed_by_job_end,
    run_checks,
    state_agreement,
    terminates,
)
from elastic_sim.checks.facts import knobs_of, limits_of
from elastic_sim.checks.hosts import eventual_incorporation
from elastic_sim.checks.liveness import LOOP_ROUNDS
from elastic_sim.trace import TraceEvent


def ev(t: float, host: str, kind: str, **data: Any) -> TraceEvent:
    return TraceEvent(t, host, f"{host}/main", kind, data)


def formed(rnd: int, members: list[str], t: float = 1.0) -> list[TraceEvent]:
    return [
        ev(t, h, "rdzv_done", round=rnd, members=members, rank=i, world_size=len(members),
           master=f"{members[0]}:29500")
        for i, h in enumerate(members)
    ]


def run_start(**knobs: Any) -> TraceEvent:
    return TraceEvent(0.0, "*", "elastic-sim", "run_start",
                      {"scenario": "t", "seed": 0, "mode": "sim",
                       "knobs": {**TE_KNOBS, **knobs}})


TE_KNOBS = {"min_nodes": 1, "max_nodes": 4, "max_restarts": 1, "monitor_interval": 0.1,
            "last_call_timeout": 1.0, "keep_alive_interval": 1.0, "keep_alive_max_attempt": 3,
            "heartbeat_timeout": 1.0, "pg_timeout": 30.0, "read_timeout": 60.0,
            "join_timeout": 60.0, "stop_timeout": 30.0}
"""torchelastic's knobs, loopback-short: the checks derive their bounds from them."""


def run_end(t: float, outcome: str = "completed") -> TraceEvent:
    return TraceEvent(t, "*", "elastic-sim", "run_end", {"outcome": outcome})


def good_history() -> list[TraceEvent]:
    """Three hosts train; c crashes at 2.4 s; a and b restore, re-form and train on until
    70 s (a long quiet phase: the world has converged to the two of them)."""
    h = [run_start()] + [ev(0.0, x, "proc_start", entry="e") for x in "abc"]
    h += formed(0, ["a", "b", "c"])
    h += [ev(1.05, x, "workers_started", round=0, restart_count=0) for x in "abc"]
    h += [ev(1.1, x, "sync", round=0, rank=i, root="a", step=0, digest="d0")
          for i, x in enumerate("abc")]
    for seq, op in enumerate(["allreduce", "broadcast"]):
        h += [ev(1.2 + seq, x, "coll_enter", group="round0", seq=seq, op=op, nbytes=8)
              for x in "abc"]
    h += [ev(2.0, x, "step", round=0, step=10) for x in "abc"]
    h += [ev(2.0, x, "commit", step=10, digest="d10") for x in "abc"]
    h += [ev(2.4, "c", "fault", id="crash-c", type="crash", target="c", phase="start"),
          ev(2.4, "c", "proc_exit", code=-9, reason="host crashed")]
    h += [ev(2.4, "a", "agent_restart", reason="FAILED", remaining_restarts=0)]
    h += [ev(2.5, x, "restore", step=10, digest="d10") for x in "ab"]
    h += [ev(2.9, x, "rdzv_join", round=1) for x in "ab"]
    h += formed(1, ["a", "b"], 3.0)
    h += [ev(3.05, x, "workers_started", round=1, restart_count=1) for x in "ab"]
    h += [ev(3.08, x, "reset_callback", round=1, rank=i, size=2, epoch=1, step=10,
             digest="d10") for i, x in enumerate("ab")]
    h += [ev(3.1, x, "sync", round=1, rank=i, root="a", step=10, digest="d10")
          for i, x in enumerate("ab")]
    h += [ev(3.2 + seq, x, "coll_enter", group="round1", seq=seq, op="allreduce", nbytes=8)
          for seq in range(2) for x in "ab"]
    h += [ev(4.0, x, "step", round=1, step=20) for x in "ab"]
    h += [ev(4.0, x, "commit", step=20, digest="d20") for x in "ab"]
    h += [ev(70.0, x, "commit", step=700, digest="d700") for x in "ab"]
    h += [ev(70.5, x, "job_done", step=700, digest="d700") for x in "ab"]
    h += [ev(70.6, "a", "rdzv_shutdown", closed=True)]
    h += [ev(70.7, x, "proc_exit", code=0, reason="returned") for x in "ab"]
    return [*h, run_end(70.7)]


def test_a_correct_history_passes_every_check() -> None:
    results = run_checks(good_history())
    assert [r.name for r in results if not r.ok] == []
    # torchft's checks read torchft's own events (tests/checks/test_torchft_checks.py)
    assert all(r.checked > 0 for r in results if not r.name.startswith("ft_"))


def test_disagreeing_members_are_caught() -> None:
    h = good_history()
    h[1] = ev(1.0, "b", "rdzv_done", round=0, members=["a", "b"], rank=1, world_size=2)
    res = membership_agreement(h)
    assert not res.ok
    assert "round 0" in res.violations[0].message
    assert {e.host for e in res.violations[0].witness} == {"a", "b"}


def test_duplicate_and_out_of_range_ranks_are_caught() -> None:
    h = formed(0, ["a", "b", "c"])
    h[2] = ev(1.0, "c", "rdzv_done", round=0, members=["a", "b", "c"], rank=1, world_size=3)
    res = rank_validity(h)
    assert not res.ok
    assert any("rank 1 held by b and c" in v.message for v in res.violations)
    h[2] = ev(1.0, "c", "rdzv_done", round=0, members=["a", "b", "c"], rank=3, world_size=3)
    assert any("outside 0..2" in v.message for v in rank_validity(h).violations)


def test_a_host_listed_twice_in_a_membership_of_hosts_is_caught() -> None:
    """A static round that counted a restarted host's two arrivals: [a, b, b] is a world
    of two hosts that says three. Horovod lists a host once per slot: no violation there;
    nor where no knobs say which protocol it is."""
    def run(knobs: dict[str, Any]) -> list[TraceEvent]:
        start = TraceEvent(0.0, "*", "elastic-sim", "run_start",
                           {"scenario": "t", "seed": 0, "mode": "sim", "knobs": knobs})
        h = formed(0, ["a", "b", "b"])
        h[2] = ev(1.0, "b", "rdzv_done", round=0, members=["a", "b", "b"], rank=2,
                  world_size=3)
        return [start, *h]

    static = {"min_hosts": 2, "max_hosts": 4, "last_call": 1.0, "join_timeout": 600.0,
              "group_timeout": 30.0, "store_timeout": 60.0}
    res = rank_validity(run(static))
    assert [v.message for v in res.violations
            if "listed" in v.message] == ["round 0: b listed more than once in the membership "
                                          "['a', 'b', 'b'] (each member is a host)"]
    horovod = {"np": 2, "min_np": 2, "reset_limit": None, "gloo_timeout": 30.0,
               "elastic_timeout": 600.0, "discovery": {"hosts": ["a:1", "b:2"]}}
    assert not [v for v in rank_validity(run(horovod)).violations if "listed" in v.message]
    assert not [v for v in rank_validity(run({})[1:]).violations if "listed" in v.message]


def test_members_entering_different_collectives_are_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "coll_enter" and e.host == "c"
             and e.get("seq") == 1)
    h[i] = ev(2.2, "c", "coll_enter", group="round0", seq=1, op="allreduce", nbytes=8)
    res = collective_sequence(h)
    assert not res.ok
    assert "#1" in res.violations[0].message
    assert [e.get("op") for e in res.violations[0].witness] == ["broadcast", "allreduce"]


def test_a_member_that_missed_the_sync_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "sync" and e.host == "c")
    h[i] = ev(1.1, "c", "sync", round=0, rank=2, root="a", step=0, digest="other")
    res = state_agreement(h)
    assert not res.ok
    assert "c holds step 0 digest other" in res.violations[0].message
    assert [e.host for e in res.violations[0].witness] == ["a", "c"]


def test_progress_going_backwards_is_caught() -> None:
    h = good_history()
    # b syncs to a state older than what it had committed: progress lost.
    i = next(i for i, e in enumerate(h) if e.kind == "sync" and e.host == "b"
             and e.get("round") == 1)
    h[i] = ev(3.1, "b", "sync", round=1, rank=1, root="a", step=0, digest="d0")
    res = committed_progress(h)
    assert not res.ok
    assert "synced to step 0, behind its committed step 10" in res.violations[0].message


def test_progress_is_not_judged_after_the_job_is_done() -> None:
    """A sync behind the committed step after the job's first job_done: the result exists
    (torchft: a replica group left with data once the others finished starts over)."""
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "sync" and e.host == "b"
             and e.get("round") == 1)
    h[i] = ev(3.1, "b", "sync", round=1, rank=1, root="a", step=0, digest="d0")
    done = [ev(3.0, "a", "job_done", step=10, digest="d10")]
    assert committed_progress(sorted([*h, *done], key=lambda e: e.t)).ok
    later = [ev(3.2, "a", "job_done", step=10, digest="d10")]
    assert not committed_progress(sorted([*h, *later], key=lambda e: e.t)).ok


def test_restoring_something_other_than_the_last_commit_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "restore" and e.host == "a")
    h[i] = ev(2.5, "a", "restore", step=0, digest="d0")
    res = committed_progress(h)
    assert not res.ok
    assert "restored step 0, but its last commit was step 10" in res.violations[0].message


def test_a_member_that_died_before_its_round_completed_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "proc_exit" and e.host == "c")
    # c's crash moved before round 1 completes, and round 1 wrongly lists c.
    h = [e for e in h if not (e.kind == "rdzv_done" and e.get("round") == 1)]
    j = next(k for k, e in enumerate(h) if e.kind == "sync" and e.get("round") == 1)
    h[j:j] = formed(1, ["a", "b", "c"], 3.0)[:2]
    res = members_alive_at_completion(h)
    assert not res.ok
    assert "round 1 completed with c as a member" in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["proc_exit", "rdzv_done"]
    assert res.violations[0].witness[0] == h[i]


def test_a_worker_killed_before_it_recorded_its_start_leaves_its_host_alive() -> None:
    # Real mode, under load (a CI run): a's worker was told to stop while it was still
    # importing torch, so it never recorded its proc_start; its agent recorded the kill.
    # a's agent lives on and joins round 1: a is alive when round 1 completes.
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_done" and e.get("round") == 1)
    killed = TraceEvent(2.8, "a", "a/w0", "proc_exit", {"code": -15, "reason": "signal TERM"})
    res = members_alive_at_completion([*h[:i], killed, *h[i:]])
    assert res.ok, res.violations
    # the agent's own exit still counts: then a has no live process when round 1 completes
    gone = ev(2.85, "a", "proc_exit", code=-9, reason="host crashed")
    res = members_alive_at_completion([*h[:i], killed, gone, *h[i:]])
    assert not res.ok and "round 1 completed with a as a member" in res.violations[0].message
    assert res.violations[0].witness[0] == gone
    # a started worker's exit is matched by its start: a stays alive through it
    started = TraceEvent(1.5, "a", "a/w0", "proc_start", {"entry": "w"})
    res = members_alive_at_completion([*h[:i], started, killed, *h[i:]])
    assert res.ok, res.violations


def stopped_and_formed_again(reason: str, code: int = -15) -> list[TraceEvent]:
    """a and b form round 0; a's agent stops its worker (nothing failed: no fault, no
    error); round 1 forms the very same world."""
    h = [run_start()] + [ev(0.0, x, "proc_start", entry="e") for x in "ab"]
    h += formed(0, ["a", "b"])
    h += [TraceEvent(1.0, x, f"{x}/w0", "proc_start", {"entry": "w"}) for x in "ab"]
    h += [TraceEvent(2.0, "a", "a/w0", "proc_exit", {"code": code, "reason": reason})]
    h += formed(1, ["a", "b"], 3.0)
    return [*h, run_end(4.0)]


@pytest.mark.parametrize("reason", ["killed by SIGTERM", "signal TERM", "signal 15"])
def test_a_stop_by_sigterm_excuses_no_reconfiguration_in_any_mode(reason: str) -> None:
    # The sim, real mode and torchrun's converted traces word a SIGTERM stop differently;
    # an agent stopping its workers is not a failure in any of them (real mode's wording
    # once counted as one, so the check could never fire on a real run).
    res = no_pointless_reconfiguration(stopped_and_formed_again(reason))
    assert not res.ok and res.checked == 1
    assert "formed again at 3 s with the same members and ranks" in res.violations[0].message
    # a worker that failed (an error, or killed by another signal) does excuse it
    assert no_pointless_reconfiguration(stopped_and_formed_again("returned", 1)).ok
    assert no_pointless_reconfiguration(stopped_and_formed_again("signal KILL", -9)).ok


def test_the_stop_code_is_sigterm_in_the_traces_numbering() -> None:
    from elastic_sim.checks.accounting import STOPPED
    from elastic_sim.protocols.api import SIGNAL_NUMBERS

    assert STOPPED == -SIGNAL_NUMBERS["TERM"]


def test_workers_told_different_master_addresses_are_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_done" and e.host == "b")
    h[i] = ev(1.0, "b", "rdzv_done", round=0, members=["a", "b", "c"], rank=1, world_size=3,
              master="c:29500")
    res = master_agreement(h)
    assert not res.ok and "b was told c:29500" in res.violations[0].message


def test_a_process_of_an_older_round_in_a_newer_collective_is_caught() -> None:
    h = good_history()
    # b never completed round 1 but enters round 1's collective from round 0.
    h = [e for e in h if not (e.kind == "rdzv_done" and e.host == "b" and e.get("round") == 1)]
    res = epoch_isolation(h)
    assert not res.ok
    assert "a entered it in round 1, b in round 0" in res.violations[0].message


def test_world_sizes_and_restarts_beyond_the_knobs_are_caught() -> None:
    h = good_history()
    assert limits(h).ok
    h[0] = run_start(min_nodes=3)
    assert "world size 2 outside [3, 4]" in limits(h).violations[0].message
    h = good_history()
    h.insert(-1, ev(4.6, "a", "agent_restart", reason="FAILED", remaining_restarts=-1))
    assert "restarted its workers 2 times, max_restarts is 1" in (
        limits(h).violations[0].message)


def test_resets_beyond_the_reset_limit_are_caught() -> None:
    def assign(rendezvous: int) -> TraceEvent:
        return ev(float(rendezvous), "a", "hvd_assign", rendezvous=rendezvous, world_size=2)

    h = [run_start(reset_limit=1), assign(1), assign(2)]
    assert limits(h).ok and limits(h).checked == 2
    res = limits([*h, assign(3)])
    assert "rendezvous 3 is reset 2, beyond reset_limit 1" in res.violations[0].message


def test_a_torchft_replica_launcher_restarting_beyond_replica_restarts_is_caught() -> None:
    def start(attempt: int) -> TraceEvent:
        return ev(float(attempt), "g1", "ft_replica_start", attempt=attempt, ranks=1)

    first = TraceEvent(0.0, "*", "elastic-sim", "run_start",
                       {"scenario": "t", "seed": 0, "mode": "sim", "protocol": "torchft",
                        "knobs": {"min_replicas": 1, "replica_restarts": 1}})
    h = [first, start(0), start(1)]  # the first start is no restart; one restart is allowed
    assert limits(h).ok and limits(h).checked == 1
    res = limits([*h, start(2)])
    assert "g1/main restarted its workers 2 times, max_restarts is 1" in (
        res.violations[0].message)
    # A launcher started again (its host restarted) has a budget of its own
    again = ev(1.5, "g1", "proc_start", entry="launcher")
    assert limits([first, start(0), start(1), again, start(0), start(1)]).ok


def test_closing_the_rendezvous_before_the_job_ended_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_shutdown")
    h.insert(2, h.pop(i))
    res = rendezvous_closed_by_job_end(h)
    assert not res.ok and "a/main closed the rendezvous" in res.violations[0].message


def test_a_hung_run_is_caught_with_its_last_progress() -> None:
    """a and b record the job's end but their processes never exit: a hang. Had they
    exited, nothing would have been running at the limit: the run only waited for a
    host still to start (a restart scheduled after it), which is not judged."""
    still = [e for e in good_history()[:-1] if e.kind != "proc_exit"]
    res = terminates([*still, run_end(600.0, "hung")])
    assert not res.ok and "time limit (600 s)" in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["job_done", "run_end"]
    exited = terminates([*good_history()[:-1], run_end(600.0, "hung")])
    assert exited.status == "n/a" and exited.not_judged.startswith(
        "every process had exited before the time limit (600 s): the run waited for a host "
        "still to start")
    # real mode records the exits of what it killed at the limit: those still ran
    killed = [ev(600.0, x, "proc_exit", code=-9, reason="killed at the time limit")
              for x in "ab"]
    assert not terminates([*still, *killed, run_end(600.0, "hung")]).ok


def test_no_progress_long_after_a_fault_is_caught() -> None:
    h = good_history()
    bound = limits_of(knobs_of(h)).progress_s  # type: ignore[union-attr]
    h = [e for e in h if e.kind not in ("step", "commit", "job_done", "run_end")
         or e.t < 2.4] + [run_end(2.4 + bound + 10, "completed")]
    res = progress_after_faults(h)
    assert not res.ok and "after crash-c started at 2.4 s" in res.violations[0].message


def test_a_failed_job_is_not_progress_when_it_could_have_gone_on() -> None:
    h = good_history()
    cut = next(i for i, e in enumerate(h) if e.kind == "commit" and e.t == 70.0)
    h = [*h[:cut], ev(4.0, "a", "job_failed", error="local error"), run_end(4.1, "failed")]
    res = progress_after_faults(h)
    assert res.ok  # commits at 4 s came after the fault: progress
    h2 = [e for e in h if not (e.kind in ("step", "commit") and e.t > 2.4)]
    res = progress_after_faults(h2)
    assert not res.ok and "next: job_failed at 4 s" in res.violations[0].message


def test_a_host_that_wants_in_but_stays_out_after_a_quiet_phase_is_caught() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_join")
    # c comes back (a fresh process) and asks to join; the world stays at a and b.
    h[i:i] = [ev(2.8, "c", "proc_start", entry="e"), ev(2.85, "c", "rdzv_join", round=1)]
    h.insert(-1, ev(70.7, "c", "proc_exit", code=0, reason="returned"))
    res = eventual_incorporation(h)
    assert not res.ok
    assert "c was available from 2.8 s on" in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["rdzv_done", "fault"]
    assert eventual_incorporation(good_history()).ok


def test_a_host_is_not_held_to_the_settle_time_while_a_link_fault_slows_the_network(
        ) -> None:
    """The same host left out, but a link fault (delay, loss) starts at 2.6 s and is still
    in force when c comes due: the knobs' settle time assumes the network's own latency."""
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_join")
    h[i:i] = [ev(2.6, "a", "fault", id="slow", type="link", target=["a", "*"],
                 phase="start"),
              ev(2.8, "c", "proc_start", entry="e"), ev(2.85, "c", "rdzv_join", round=1)]
    h.insert(-1, ev(70.7, "c", "proc_exit", code=0, reason="returned"))
    res = eventual_incorporation(h)
    assert res.ok and res.status == "n/a"
    assert res.not_judged.startswith("b, c came due while a link fault slowed the network")
    healed = [*h[:i + 1], ev(2.7, "a", "fault", id="slow", type="link", target=["a", "*"],
                             phase="heal"), *h[i + 1:]]
    assert not eventual_incorporation(healed).ok


def test_unexplained_rounds_in_a_row_without_progress_are_a_restart_loop() -> None:
    h = [e for e in good_history() if e.t < 5.0]
    h += [ev(5.0 + r, "a", "rdzv_done", round=2 + r, members=["a"], rank=0, world_size=1)
          for r in range(LOOP_ROUNDS + 1)]
    res = no_restart_loop([*h, run_end(100.0)])
    assert not res.ok and f"{LOOP_ROUNDS + 1} rounds in a row" in res.violations[0].message
    assert no_restart_loop(good_history()).ok


def test_rounds_a_one_shot_collective_fault_or_a_death_at_completion_explain() -> None:
    """A collective fault strikes the first collective entered after it starts (here in
    round 2), so it explains the round after that one too; and a member that dies between
    its round being decided and another member recording it explains that member's next
    round. A loop that goes on past them is still one."""
    base = [e for e in good_history() if e.t < 5.0]
    shot = ev(4.5, "a", "fault", id="coll-a", type="collective", target="a", phase="start")

    def rounds(first: int, n: int, t: float = 5.0) -> list[TraceEvent]:
        return [ev(t + r, "a", "rdzv_done", round=first + r, members=["a"], rank=0,
                   world_size=1) for r in range(n)]

    assert not no_restart_loop([*base, *rounds(2, 3), run_end(100.0)]).ok
    assert no_restart_loop([*base, shot, *rounds(2, 3), run_end(100.0)]).ok
    assert not no_restart_loop([*base, shot, *rounds(2, 4), run_end(100.0)]).ok
    # round 2 decided by b at 5 s; c powered off at 5.01 s; a records round 2 at 5.02 s
    died = [ev(5.0, "b", "rdzv_done", round=2, members=["a", "b"], rank=1, world_size=2),
            ev(5.01, "c", "fault", id="off-c", type="power_off", target="c", phase="start"),
            ev(5.02, "a", "rdzv_done", round=2, members=["a", "b"], rank=0, world_size=2),
            *rounds(3, 2, t=6.0)]
    assert no_restart_loop([*base, *died, run_end(100.0)]).ok
    late = [*died[:1], *died[2:], ev(5.03, "c", "fault", id="off-c", type="power_off",
                                     target="c", phase="start"), *rounds(5, 1, t=9.0)]
    assert not no_restart_loop([*base, *sorted(late, key=lambda e: e.t),
                                run_end(100.0)]).ok


def test_a_member_frozen_when_its_round_completes_counts_as_dead() -> None:
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_done" and e.get("round") == 1)
    h[i:i] = [ev(2.95, "b", "fault", id="hang-b", type="hang", target="b", phase="start")]
    res = members_alive_at_completion(h)
    assert not res.ok and "b was frozen (hung) then" in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["fault", "rdzv_done"]
    healed = [*h[:i + 1], ev(2.97, "b", "fault", id="hang-b", type="hang", target="b",
                             phase="heal"), *h[i + 1:]]
    assert members_alive_at_completion(healed).ok


def test_a_frozen_member_whose_hang_id_another_fault_closed_is_still_reported() -> None:
    # a hand-written trace reusing a fault id: a partition's heal closes the id "f" while
    # the hang under that id still freezes b (the check once raised StopIteration here)
    h = good_history()
    i = next(i for i, e in enumerate(h) if e.kind == "rdzv_done" and e.get("round") == 1)
    h[i:i] = [ev(2.9, "b", "fault", id="f", type="hang", target="b", phase="start"),
              ev(2.92, "a", "fault", id="f", type="partition", groups=[["a"], ["b"]],
                 phase="start"),
              ev(2.94, "a", "fault", id="f", type="partition", groups=[["a"], ["b"]],
                 phase="heal")]
    res = members_alive_at_completion(h)
    assert not res.ok and "b was frozen (hung) then" in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["rdzv_done"]


def test_closing_the_rendezvous_after_an_unavoidable_failure_is_fine() -> None:
    h = [e for e in good_history() if e.t < 4.0]
    h += [ev(4.0, "b", "proc_exit", code=-9, reason="host crashed"),
          ev(4.1, "a", "job_failed", error="x"), ev(4.2, "a", "rdzv_shutdown", closed=True),
          run_end(4.3, "failed")]
    h[0] = run_start(min_nodes=2)
    assert rendezvous_closed_by_job_end(h).ok  # only a was left: below min_nodes 2
    h[0] = run_start(min_nodes=1)
    res = rendezvous_closed_by_job_end(h)  # a alone could have gone on... but its budget is 0
    assert res.ok
    h.insert(-3, ev(3.9, "a", "agent_state", state="HEALTHY", remaining_restarts=1))
    res = rendezvous_closed_by_job_end(h)
    assert not res.ok and "1 host (a) was alive" in res.violations[0].message
