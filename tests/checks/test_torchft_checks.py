"""torchft's checks pass a correct history and catch each violation they are named for,
pointing at the events that witness it (hand-written histories: two replica groups of two
ranks, a quorum, one heal, then a replica crash and a new quorum)."""

from __future__ import annotations

from typing import Any

from elastic_sim.checks import run_checks
from elastic_sim.checks.torchft_quorum import ft_quorum_ids, ft_quorum_validity
from elastic_sim.checks.torchft_steps import (
    ft_data_position_agreement,
    ft_fault_isolation,
    ft_group_recovers,
    ft_liveness,
    ft_single_heal_source,
    ft_state_agreement,
    ft_unanimous_commit,
)
from elastic_sim.trace import TraceEvent

KNOBS = {"min_replicas": 2, "ranks_per_replica": 2, "timeout": 60.0, "quorum_timeout": 60.0,
         "pg_timeout": 60.0, "connect_timeout": 60.0, "heartbeat_timeout": 5.0,
         "join_timeout": 60.0}
FT = [n for n in ("ft_quorum_ids", "ft_quorum_validity", "ft_state_agreement",
                  "ft_data_position_agreement", "ft_unanimous_commit",
                  "ft_single_heal_source", "ft_fault_isolation", "ft_group_recovers",
                  "ft_liveness")]


def ev(t: float, proc: str, kind: str, **data: Any) -> TraceEvent:
    return TraceEvent(t, proc.split("/")[0], proc, kind, data)


def lh_quorum(t: float, qid: int, members: list[str], participants: list[str] | None = None,
              heartbeating: list[str] | None = None, failures: list[int] | None = None
              ) -> TraceEvent:
    return ev(t, "lh/main", "lh_quorum", quorum_id=qid, rule="valid", bump=None,
              members=[m.split(":")[0] for m in members], replica_ids=members,
              steps=[0] * len(members), commit_failures=failures or [0] * len(members),
              participants=participants or members, heartbeating=heartbeating or members)


def steps(t: float, qid: int, step: int, reps: dict[str, str], data: int,
          digest: str = "") -> list[TraceEvent]:
    """Every rank of every replica (``host -> replica id``) votes yes and commits."""
    out = []
    for host, rid in reps.items():
        for g in range(2):
            proc = f"{host}/rank{g}"
            out.append(ev(t, proc, "ft_should_commit", quorum_id=qid, replica_id=rid,
                          group_rank=g, vote=True, decision=True, step=step, participants=2,
                          position=data))
            out.append(ev(t, proc, "step", round=qid, step=step, data=data, shard=g,
                          digest=digest or f"d{step}.{g}"))
    return out


def good() -> list[TraceEvent]:
    a, b, b2 = "g0:1", "g1:1", "g1:2"
    h = [TraceEvent(0.0, "*", "elastic-sim", "run_start",
                    {"protocol": "torchft", "knobs": KNOBS, "coordinator": "lh"}),
         ev(0.0, "lh/main", "proc_start", entry="e"), ev(0.0, "lh/main", "lh_start")]
    h += [ev(0.0, f"{x}/main", "ft_replica_start", attempt=0, ranks=2) for x in ("g0", "g1")]
    h += [ev(1.3, f"{x}/rank{g}", "proc_start", entry="e") for x in ("g0", "g1")
          for g in range(2)]
    h.append(lh_quorum(1.3, 1, [a, b]))
    h += [ev(1.31, f"{x}/rank{g}", "ft_quorum", quorum_id=1) for x in ("g0", "g1")
          for g in range(2)]
    h += [ev(1.32, f"g1/rank{g}", "ft_heal", quorum_id=1, replica_id=b, group_rank=g,
             src="g0", src_replica_rank=0, step=0, digest="x") for g in range(2)]
    for s in range(1, 4):
        h.append(lh_quorum(1.3 + s / 10, 1, [a, b]))
        h += steps(1.35 + s / 10, 1, s, {"g0": a, "g1": b}, s)
    h += [ev(2.0, "g1", "fault", id="kill-g1", type="crash_process", target="g1/rank0",
             phase="start"),
          ev(2.1, "g1/main", "ft_replica_failed", attempt=0, exit_codes=[-9, -15]),
          ev(2.1, "g1/main", "ft_replica_start", attempt=1, ranks=2)]
    h.append(lh_quorum(7.0, 2, [a, b2], failures=[1, 0]))
    h += [ev(7.01, f"g1/rank{g}", "ft_heal", quorum_id=2, replica_id=b2, group_rank=g,
             src="g0", src_replica_rank=0, step=3, digest="y") for g in range(2)]
    h += steps(7.1, 2, 4, {"g0": a, "g1": b2}, 5)
    h += [ev(7.2, "g0/rank0", "job_done", step=4, digest="d4")]
    return [*h, TraceEvent(7.5, "*", "elastic-sim", "run_end", {"outcome": "completed"})]


def verdicts(h: list[TraceEvent]) -> dict[str, Any]:
    return {r.name: r for r in run_checks(h) if r.name in FT}


def test_a_correct_history_passes_every_torchft_check_having_examined_something() -> None:
    results = verdicts(good())
    assert sorted(results) == sorted(FT)
    assert {n: (r.ok, r.checked > 0) for n, r in results.items()} == dict.fromkeys(
        FT, (True, True))


def test_an_id_not_bumped_for_new_members_is_caught() -> None:
    h = [e if e.kind != "lh_quorum" or e.get("quorum_id") != 2 else
         lh_quorum(e.t, 1, ["g0:1", "g1:2"]) for e in good()]
    res = ft_quorum_ids(h)
    assert "issued quorum 1 after 1, where its members changed: upstream gives it id 2" in \
        res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["lh_quorum", "lh_quorum"]


def test_an_id_bumped_for_nothing_and_a_rank_going_back_are_caught() -> None:
    h = good()
    first = next(i for i, e in enumerate(h) if e.kind == "lh_quorum")
    h.insert(first + 1, lh_quorum(1.3, 2, ["g0:1", "g1:1"]))  # a new id for the same quorum
    assert "where nothing changed" in ft_quorum_ids(h).violations[0].message
    back = [*good(), ev(7.3, "g0/rank0", "ft_quorum", quorum_id=1)]
    back.insert(-2, ev(7.05, "g0/rank0", "ft_quorum", quorum_id=2))
    assert "its quorum id went back" in ft_quorum_ids(back).violations[0].message
    # ... unless the Lighthouse started again in between: its ids start over
    again = [*back[:-1], ev(7.2, "lh/main", "lh_start", min_replicas=1, join_timeout=60.0,
                            heartbeat_timeout=5.0), back[-1]]
    assert ft_quorum_ids(again).ok


def test_a_quorum_without_a_majority_of_heartbeating_replicas_is_caught() -> None:
    h = [e if e.kind != "lh_quorum" or e.get("quorum_id") != 2 else
         lh_quorum(e.t, 2, ["g0:1", "g1:2"], heartbeating=["g0:1", "g1:1", "g1:2", "g2:1"])
         for e in good()]
    res = ft_quorum_validity(h)
    assert "2 healthy participants of 4 heartbeating replicas" in res.violations[0].message


def test_a_quorum_below_min_replicas_and_one_with_a_stranger_are_caught() -> None:
    h = [e if e.kind != "lh_quorum" or e.get("quorum_id") != 2 else
         lh_quorum(e.t, 2, ["g0:1"]) for e in good()]
    assert "fewer than min_replicas 2" in ft_quorum_validity(h).violations[0].message
    h = [e if e.kind != "lh_quorum" or e.get("quorum_id") != 2 else
         lh_quorum(e.t, 2, ["g0:1", "g1:2"], participants=["g0:1"]) for e in good()]
    assert "g1:2, not a healthy participant" in ft_quorum_validity(h).violations[0].message


def test_replicas_disagreeing_on_state_or_data_at_one_step_are_caught() -> None:
    h = good()
    i = next(i for i, e in enumerate(h) if e.kind == "step" and e.host == "g1"
             and e.get("step") == 4)
    h[i] = ev(h[i].t, h[i].proc, "step", **{**h[i].data, "digest": "other", "data": 4})
    state, data = ft_state_agreement(h), ft_data_position_agreement(h)
    assert "g0 holds state d4.0, g1 holds other" in state.violations[0].message
    assert "g0 holds data position 5, g1 holds 4" in data.violations[0].message
    assert [e.kind for e in state.violations[0].witness] == ["step", "step"]


def test_a_step_without_a_unanimous_yes_is_caught() -> None:
    h = good()
    i = next(i for i, e in enumerate(h) if e.kind == "ft_should_commit" and e.host == "g1")
    h[i] = ev(h[i].t, h[i].proc, "ft_should_commit", **{**h[i].data, "vote": False})
    assert "with 1 yes votes of 2 ranks" in ft_unanimous_commit(h).violations[0].message
    lone = [e for e in good() if not (e.kind == "ft_should_commit" and e.host == "g1"
                                      and e.get("step") == 2)]
    assert "committed step 2 without a yes" in ft_unanimous_commit(lone).violations[0].message


def test_ranks_of_one_replica_healing_from_two_sources_are_caught() -> None:
    h = good()
    i = next(i for i, e in enumerate(h) if e.kind == "ft_heal" and e.proc == "g1/rank1"
             and e.get("quorum_id") == 2)
    h[i] = ev(h[i].t, h[i].proc, "ft_heal", **{**h[i].data, "src": "g2"})
    res = ft_single_heal_source(h)
    assert "healed in quorum 2 from g0, g2" in res.violations[0].message


def test_no_step_after_the_faults_stop_is_caught_unless_the_lighthouse_is_gone() -> None:
    h = [e for e in good() if e.t < 7.0 or e.kind == "run_end"]
    h[-1] = TraceEvent(200.0, "*", "elastic-sim", "run_end", {"outcome": "failed"})
    res = ft_liveness(h)
    assert "no committed step within 80 s after kill-g1 started at 2 s" in \
        res.violations[0].message
    # ranks that leave by the job's stop rule (their data ran out) and a run that ends
    # within the bound: not a hang; the same job_done past the bound still is one
    out = [*h[:-1], ev(60.0, "g0/rank0", "job_done", step=3, digest="d3"),
           TraceEvent(61.0, "*", "elastic-sim", "run_end", {"outcome": "failed"})]
    assert ft_liveness(out).checked == 1 and ft_liveness(out).ok
    late = [*h[:-1], ev(150.0, "g0/rank0", "job_done", step=3, digest="d3"), h[-1]]
    assert not ft_liveness(late).ok
    quit_early = [*h[:-1], TraceEvent(61.0, "*", "elastic-sim", "run_end",
                                      {"outcome": "failed"})]
    assert not ft_liveness(quit_early).ok  # ended failed without the stop rule: judged
    gone = [*h[:-1], ev(3.0, "lh", "fault", id="lh", type="crash", target="lh",
                        phase="start"), h[-1]]
    assert ft_liveness(gone).checked == 0


def test_a_healthy_replica_group_restarted_after_anothers_fault_is_caught() -> None:
    """g0, which no fault touched, has its ranks fail after g1's crash (the restarted g1
    kept the Lighthouse waiting and g0's quorum request timed out); g1's own restart is
    the fault's and is fine. A fault on the Lighthouse, or one that names no host, may
    fail every group: not judged then."""
    h = good()
    i = next(i for i, e in enumerate(h) if e.kind == "lh_quorum" and e.get("quorum_id") == 2)
    h.insert(i, ev(6.5, "g0/main", "ft_replica_failed", attempt=0, exit_codes=[1, 1]))
    res = ft_fault_isolation(h)
    assert res.checked == 1 and len(res.violations) == 1
    assert ("replica group g0, which no fault touched, failed at 6.5 s (its ranks' exit "
            "codes [1, 1]) after kill-g1 hit g1/rank0 at 2 s") in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["fault", "ft_replica_failed"]
    for target in ("lh", [["g0"], ["lh"]], "*"):
        cut = [*h[:-1], ev(1.9, "g1", "fault", id="x", type="partition", target=target,
                            phase="start"), h[-1]]
        cut.sort(key=lambda e: e.t)
        assert ft_fault_isolation(cut).checked == 0, target
    # a failure after the job completed is a late group's, not the fault's
    late = [e if e.kind != "ft_replica_failed" or e.host != "g0" else
            ev(7.3, "g0/main", "ft_replica_failed", attempt=0, exit_codes=[1, 1]) for e in h]
    late.sort(key=lambda e: e.t)
    assert ft_fault_isolation(late).ok


def _given_up(h: list[TraceEvent], at: float = 6.0) -> list[TraceEvent]:
    """``h`` with g1's second start (attempt 1, after kill-g1) failing at ``at`` and its
    launcher giving up then (max_restarts 1)."""
    out = [*h, ev(at, "g1/main", "ft_replica_failed", attempt=1, exit_codes=[0, 1]),
           ev(at, "g1/main", "job_failed", error="replica group g1: its ranks failed 2 "
              "times (max_restarts 1)")]
    out.sort(key=lambda e: e.t)
    return out


def test_a_group_given_up_after_a_start_no_fault_hit_is_caught() -> None:
    """kill-g1 explains g1's first failure (attempt 0) but not the second: a start that
    failed with nothing against the group is a restart loop on a healthy host. A fault
    that lasts (a cut of g1 until 9 s) or one every group feels (on the Lighthouse)
    explains it; a start that failed after the job completed is not judged; a group whose
    launcher did not give up is examined and passes (the good history)."""
    base = good()
    assert ft_group_recovers(base).checked == 1 and ft_group_recovers(base).ok
    res = ft_group_recovers(_given_up(base))
    assert res.checked == 1 and len(res.violations) == 1
    assert ("replica group g1 was given up at 6 s after 2 failed starts with 1 fault(s) "
            "against it (the first: kill-g1 at 2 s): 1 of them failed with no fault against "
            "the group (the first at 6 s, attempt 1)") in res.violations[0].message
    assert [e.kind for e in res.violations[0].witness] == ["fault", "ft_replica_failed",
                                                           "job_failed"]
    # the same through run_checks, whose protocol-neutral history has each start after
    # the first as a `restart` of the launcher: a kill during attempt 1 explains it
    assert len(verdicts(_given_up(base))["ft_group_recovers"].violations) == 1
    again = [ev(5.0, "g1", "fault", id="kill-again", type="crash_process",
                target="g1/rank0", phase="start")]
    assert ft_group_recovers(_given_up([*base, *again])).ok
    assert verdicts(_given_up([*base, *again]))["ft_group_recovers"].ok
    lh_killed = [ev(2.5, "lh", "fault", id="lh-kill", type="crash_process",
                    target="lh/main", phase="start")]
    assert ft_group_recovers(_given_up([*base, *lh_killed])).ok  # nothing restarts it
    # a preempted Lighthouse host is gone for good: the grace's end is not a heal
    gone = [ev(2.5, "lh", "fault", id="lh-pre", type="preempt", target="lh", phase="start"),
            ev(3.0, "lh", "fault", id="lh-pre", type="preempt", target="lh", phase="heal")]
    h = _given_up([*base, *gone], at=20.0)
    h = [e if not (e.kind == "ft_replica_start" and e.get("attempt") == 1)
         else ev(10.0, "g1/main", "ft_replica_start", attempt=1, ranks=2)
         for e in h if e.kind != "job_done"]  # attempt 1 starts 7 s after the grace's end
    h.sort(key=lambda e: e.t)
    assert ft_group_recovers(h).ok
    for target in (["g1", "g0"], "lh", "*"):
        cut = [ev(2.5, "g1", "fault", id="cut", type="partition", target=target,
                  phase="start"), ev(9.0, "g1", "fault", id="cut", type="partition",
                                     target=target, phase="heal")]
        assert ft_group_recovers(_given_up([*base, *cut])).ok, target
    # a cut healed more than RESTART_SLACK_S before the start does not explain it
    early = [ev(2.5, "g1", "fault", id="cut", type="partition", target=["g1", "g0"],
                phase="start"), ev(2.6, "g1", "fault", id="cut", type="partition",
                                   target=["g1", "g0"], phase="heal")]
    h = _given_up([*base, *early])
    h = [e if not (e.kind == "ft_replica_start" and e.get("attempt") == 1)
         else ev(8.0, "g1/main", "ft_replica_start", attempt=1, ranks=2) for e in h]
    h = [e if e.kind not in ("ft_replica_failed", "job_failed") or e.get("attempt") == 0
         else TraceEvent(9.0, e.host, e.proc, e.kind, e.data) for e in h
         if e.kind != "job_done"]
    h.sort(key=lambda e: e.t)
    assert not ft_group_recovers(h).ok
    assert ft_group_recovers(_given_up(base, at=7.3)).ok  # after g0's job_done at 7.2 s
    # a one-shot fault armed before a start (a collective fault, which fails the next
    # collective) is against the first of the group's starts to fail after it
    armed = [ev(3.0, "g1", "fault", id="coll", type="collective", target="g1",
                phase="start")]
    h = [e if not (e.kind == "ft_replica_start" and e.get("attempt") == 1)
         else ev(4.0, "g1/main", "ft_replica_start", attempt=1, ranks=2)
         for e in _given_up([*base, *armed])]
    h.sort(key=lambda e: e.t)
    assert ft_group_recovers(h).ok
    assert verdicts(h)["ft_group_recovers"].ok
    # and only that one: armed before attempt 0's failure, it does not explain attempt 1
    armed = [ev(1.5, "g1", "fault", id="coll", type="collective", target="g1",
                phase="start")]
    no_kill = [e for e in base if e.get("id") != "kill-g1"]
    assert not ft_group_recovers(_given_up([*no_kill, *armed])).ok
