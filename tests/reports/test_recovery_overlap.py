"""Recovery figures when faults overlap, against figures worked out by hand.

The worlds are built so the arithmetic is exact: links have no latency and (practically)
infinite bandwidth, a sleep wakes on time, and a survivor notices a dead peer at once
(``detect_fast_max`` 0, never the slow path). What is left are the calibration constants:

- a ring allreduce over W members costs 2(W-1) algorithm steps of ``ALPHA`` (150 us), so a
  training step of W members lasts ``STEP + 2(W-1) ALPHA`` (W=4: 0.1009 s, W=2: 0.1003 s);
- a commit step adds W store requests (each member asks whether hosts wait to join), served
  one at a time, ``SERVICE`` (50 us) each;
- a sync costs the group's init barrier (2 ceil(log2 W) steps), the progress allreduce and
  four broadcasts (header size and body, state size and body: W-1 steps each): W=2 1.2 ms,
  W=3 2.4 ms;
- a static rendezvous waits its ``last_call`` (1 s) for more hosts, plus its store requests
  (about 7 per host, served one at a time: under 40, 2 ms), so its figures are bounded
  within 2 ms;
- a torchelastic worker starts ``PROCESS_START`` (1.3 s) after its agent spawns it.

Start-up is not under test: each case reads when round 0 synced and computes from there.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import yaml

from elastic_sim import sim
from elastic_sim.expect import evaluate
from elastic_sim.pipeline import simulate
from elastic_sim.reports.metrics import Metrics, compute, goodput
from elastic_sim.reports.progress import Stall
from elastic_sim.scenario import PROCESS_START, ExpectModel, build_world, parse_scenario
from elastic_sim.sim.store import SERVICE_TIME
from elastic_sim.testing import load
from elastic_sim.trace import TraceEvent, expand_stretches
from elastic_sim.world import PROCESS_EXIT, CollectiveModel

ALPHA = CollectiveModel().alpha
SERVICE = SERVICE_TIME
STEP = 0.1
LAST_CALL = 1.0
STORE_SLACK = 40 * SERVICE
"""Store requests of one rendezvous (check, add, set, waits, arrivals, close; about 7 per
host, one at a time): under 2 ms."""
EXACT = 1e-6


def period(w: int) -> float:
    """One training step of ``w`` members: the sleep, then the ring allreduce."""
    return STEP + 2 * (w - 1) * ALPHA


def sync_time(w: int) -> float:
    """Init barrier, progress allreduce, four broadcasts."""
    return (2 * math.ceil(math.log2(w)) + 2 * (w - 1) + 4 * (w - 1)) * ALPHA


def step_at(synced: float, k: int, w: int, first: int = 0, every: int = 10) -> float:
    """When step ``k`` completes in a round of ``w`` that synced at ``synced`` from step
    ``first``: a period per step, plus W store requests at every commit."""
    commits = k // every - first // every
    return synced + (k - first) * period(w) + commits * w * SERVICE


def run(text: str) -> tuple[list[TraceEvent], Metrics]:
    """Run a scenario in a world with instant failure detection and exact wake-ups."""
    sc = parse_scenario(yaml.safe_load(text))
    world = replace(build_world(sc, sc.seed), wake_latency=0.0,
                    collectives=CollectiveModel(detect_fast_max=0.0, detect_slow_prob=0.0))
    events: list[TraceEvent] = []
    res = sim.run(world, sc.fault_objects(), sc.seed, events.append)
    events = list(expand_stretches(events))  # training summaries as their steps
    return events, compute(events, sc.workload.steps, res.exit_codes, res.hung, res.end_time)


def synced(events: list[TraceEvent], rnd: int) -> float:
    """When the last member of round ``rnd`` synced."""
    return max(e.t for e in events if e.kind == "sync" and e.get("round") == rnd)


STATIC = """
protocol: {name: static, knobs: {min_hosts: 2, max_hosts: 4, last_call: 1.0,
                                 group_timeout: %s}}
cluster: {hosts: 4, store_host: h0, latency: 0, bandwidth: 1.0e+15}
workload: {steps: 60, step_time: 0.1, commit_every: 10, state_bytes: 1024}
faults:
%s
"""


def test_a_partition_then_a_crash_each_get_their_own_figures() -> None:
    """h3 is cut off at 2.35 s: the step-24 allreduce waits for it (no progress, no error:
    the group timeout is 5 s). At 3.0 s h2 crashes: the waiting survivors fail at once,
    naming h2. The crash needed the recovery; the cut caused only the stall before it."""
    events, m = run(STATIC % (5, "  - {id: cut-h3, type: partition, groups: [[h3], [h0, h1, h2]],"
                                 " at: 2.35, duration: 100}\n"
                                 "  - {id: crash-h2, type: crash, host: h2, at: 3.0}"))
    cut, crash = m.recoveries
    s0 = synced(events, 0)
    # Step 23 completes at s0 + 23 x 0.1009 + 2 commits x 4 x 50 us (= 2.3268 with s0 at
    # 5.7 ms); step 24 would at 2.4277, after the cut: the job last progressed at step 23.
    t23 = step_at(s0, 23, 4)
    assert t23 < 2.35 < step_at(s0, 24, 4)
    assert max(int(e.get("step")) for e in events if e.kind == "step" and e.t < 3.0) == 23
    # The cut: nobody's failure named it, so no recovery; it stalled the job from when step
    # 24 was due (t23 + one period) until the crash took over at 3.0 s: 0.5723 s.
    assert not cut.needed_recovery and cut.recovery_s is None and cut.lost_steps == 0
    assert cut.stall_s == pytest.approx(3.0 - (t23 + period(4)), abs=EXACT)
    # The crash: seen at 3.0 s exactly (the allreduce was pending), by a failure naming h2.
    ph = crash.phases()
    assert crash.detected_at == pytest.approx(3.0, abs=EXACT) and "(h2)" in crash.seen
    assert ph["detect"] == pytest.approx(0.0, abs=EXACT)
    # h0 and h1 re-form without h2 (dead) and h3 (cut from the store): the last call.
    assert m.world_sizes == [4, 2] and crash.new_round == 1
    assert LAST_CALL <= ph["rendezvous"] <= LAST_CALL + STORE_SLACK  # type: ignore[operator]
    assert ph["sync"] == pytest.approx(sync_time(2), abs=EXACT)            # 1.2 ms
    assert ph["first_step"] == pytest.approx(period(2), abs=EXACT)         # step 21, W=2
    # Progress thrown away once: the job had reached step 23, it resumes from commit 20.
    assert crash.lost_steps == 3 and m.lost_steps == 3
    assert crash.stall_s == pytest.approx(synced(events, 1) - 3.0, abs=EXACT)  # its recovery
    # The timeline: the cut's stall, then the crash's recovery up to the new round's sync.
    assert m.stalls == [
        Stall(pytest.approx(t23 + period(4), abs=EXACT), 3.0, "cut-h3", False),  # type: ignore[arg-type]
        Stall(3.0, synced(events, 1), "crash-h2", True),
    ]
    g = goodput(events, m.rounds, m.end_time, m.stalls)
    assert g.stalled_s == pytest.approx(cut.stall_s + synced(events, 1) - 3.0, abs=EXACT)


def test_a_crash_during_a_recovery_ends_with_the_same_world_and_loses_steps_once() -> None:
    """h3 crashes at 2.55 s; while the survivors wait out round 1's last call, h2 (already
    in round 1's arrivals) crashes at 3.0 s. Round 1 closes with h2 in it, its group never
    forms (h2 never joins): the init times out after 5 s and round 2 forms with h0, h1."""
    events, m = run(STATIC % (5, "  - {id: crash-h3, type: crash, host: h3, at: 2.55}\n"
                                 "  - {id: crash-h2, type: crash, host: h2, at: 3.0}"))
    first, second = m.recoveries
    s0 = synced(events, 0)
    # Step 25 completes at 2.5286 (s0 + 25 x 0.1009 + 2 x 0.2 ms); after its 0.1 s sleep
    # each member enters the step-26 allreduce, which fails at once: h3 is dead.
    t25 = step_at(s0, 25, 4)
    assert first.detected_at == pytest.approx(t25 + STEP, abs=EXACT)
    assert first.phases()["detect"] == pytest.approx(t25 + STEP - 2.55, abs=EXACT)  # 78.6 ms
    assert "(h3)" in first.seen
    # Round 1 = [h0, h1, h2] closes a last call later; its group init times out 5 s after
    # the first member entered it, naming the members it waited for (h2 among them).
    assert [r.members for r in m.rounds] == [["h0", "h1", "h2", "h3"], ["h0", "h1", "h2"],
                                             ["h0", "h1"]]
    init = min(e.t for e in events if e.kind == "group_init" and e.get("group") == "round1")
    assert (first.detected_at + LAST_CALL <= init
            <= first.detected_at + LAST_CALL + STORE_SLACK)  # type: ignore[operator]
    assert second.detected_at == pytest.approx(init + 5.0, abs=EXACT)
    assert "group init CollectiveTimeout" in second.seen
    # Both recover in round 2 (round 1 never trained): a last call after the init failed,
    # then sync (W=2) and one step.
    r2 = m.rounds[2].formed_at
    assert second.detected_at + LAST_CALL <= r2 <= second.detected_at + LAST_CALL + STORE_SLACK  # type: ignore[operator]
    end = r2 + sync_time(2) + period(2)
    for rec, at in ((first, 2.55), (second, 3.0)):
        assert rec.new_round == 2
        assert rec.first_step_at == pytest.approx(end, abs=EXACT)
        assert rec.recovery_s == pytest.approx(end - at, abs=EXACT)
    # crash-h3: 0.0786 + 1 + 5 + 1 + 1.2 ms + 0.1003, about 7.18 s; crash-h2 0.45 s less.
    assert 7.18 < first.recovery_s < 7.182 + 2 * STORE_SLACK  # type: ignore[operator]
    # One rollback (step 25 back to commit 20), counted once, against the first crash.
    assert (first.lost_steps, second.lost_steps, m.lost_steps) == (5, 0, 5)
    # Each fault that needed a recovery is judged: 7 s passes the second, fails the first.
    (res,) = evaluate(ExpectModel(max_recovery_s=7.0), m)
    assert not res.ok
    assert res.actual.startswith("crash-h3 7.18") and "; crash-h2 6.73" in res.actual
    (res,) = evaluate(ExpectModel(max_recovery_s=7.2), m)
    assert res.ok
    # Real mode's failures do not name the dead peer (Gloo's message gives no rank): without
    # ``peer`` a death names every other member, and the same faults are blamed.
    blind = [TraceEvent(e.t, e.host, e.proc, e.kind, {k: v for k, v in e.data.items()
                                                        if k != "peer"}) for e in events]
    again = compute(blind, 60, {}, False, m.end_time)
    assert [(r.detected_at, r.first_step_at, r.lost_steps) for r in again.recoveries] == [
        (r.detected_at, r.first_step_at, r.lost_steps) for r in m.recoveries]


def test_a_hang_across_a_round_reports_its_stall_and_the_re_admission_it_cost() -> None:
    """h2 freezes at 2.05 s for 2 s; at 3.0 s h3 crashes. h0 and h1 fail at once naming h3
    and form round 1 without h2 (still frozen). h2 thaws at 4.05 s, sees the same failure,
    finds round 1 closed and waits; at round 1's next commit the members leave for round 2,
    which admits h2 back. The hang caused no failure anybody saw: it reports its stall."""
    events, m = run(STATIC % (30, "  - {id: hang-h2, type: hang, host: h2, at: 2.05,"
                                  " duration: 2.0}\n"
                                  "  - {id: crash-h3, type: crash, host: h3, at: 3.0}"))
    hang, crash = m.recoveries
    assert m.world_sizes == [4, 2, 3]
    s0 = synced(events, 0)
    t20 = step_at(s0, 20, 4)  # 2.0241: the commit just before the freeze
    assert t20 < 2.05 < step_at(s0, 21, 4)
    # The crash: seen at 3.0 exactly; round 1 after the last call; sync and one step of W=2.
    ph = crash.phases()
    assert crash.detected_at == pytest.approx(3.0, abs=EXACT) and "(h3)" in crash.seen
    assert crash.new_round == 1
    assert LAST_CALL <= ph["rendezvous"] <= LAST_CALL + STORE_SLACK  # type: ignore[operator]
    assert ph["sync"] == pytest.approx(sync_time(2), abs=EXACT)
    assert ph["first_step"] == pytest.approx(period(2), abs=EXACT)
    # h2's own failure (at its thaw) names h3 too: the hang is not what anybody saw.
    assert not hang.needed_recovery and hang.recovery_s is None
    # Round 1 resumes at step 20 and leaves at its commit 30 (h2 waits): 10 periods of W=2
    # plus 2 store requests; round 2 forms a last call later and syncs (W=3: 2.4 ms).
    s1 = synced(events, 1)
    t30 = step_at(s1, 30, 2, first=20)
    r2 = m.rounds[2]
    assert t30 + LAST_CALL <= r2.formed_at <= t30 + LAST_CALL + STORE_SLACK
    assert synced(events, 2) == pytest.approx(r2.formed_at + sync_time(3), abs=EXACT)
    # The hang's stall: from when step 21 was due to the crash (3.0 - (t20 + 0.1009) =
    # 0.875 s), plus re-admitting h2: from when step 31 was due to round 2's sync.
    before = 3.0 - (t20 + period(4))
    readmit = synced(events, 2) - (t30 + period(2))
    assert hang.stall_s == pytest.approx(before + readmit, abs=EXACT)
    assert 0.875 + 0.9021 - EXACT <= hang.stall_s <= 0.875 + 0.9021 + STORE_SLACK
    assert m.stalls == [
        Stall(pytest.approx(t20 + period(4), abs=EXACT), 3.0, "hang-h2", False),  # type: ignore[arg-type]
        Stall(3.0, s1, "crash-h3", True),
        Stall(pytest.approx(t30 + period(2), abs=EXACT), synced(events, 2), "hang-h2", False),  # type: ignore[arg-type]
    ]
    # Nothing was re-executed: round 1 resumed from commit 20 (the job had reached 20) and
    # round 2 from the most advanced member's commit 30; h2's own restore is not the job's.
    assert m.lost_steps == 0 and not m.rollbacks


TORCHELASTIC = """
protocol:
  name: torchelastic
  knobs: {min_nodes: 2, max_nodes: 3, max_restarts: 3, monitor_interval: 0.1,
          keep_alive_interval: 1, keep_alive_max_attempt: 3, heartbeat_timeout: 1,
          last_call_timeout: 1, join_timeout: 60, close_timeout: 10, shutdown_timeout: 5,
          exit_barrier_timeout: 30, pg_timeout: 5}
cluster: {hosts: 3, store_host: h0, latency: 0, bandwidth: 1.0e+15}
workload: {steps: 120, step_time: 0.1, commit_every: 10, state_bytes: 1024}
faults:
  - {id: kill-h1-worker, type: crash_process, proc: h1/w0, at: 9.05}
  - {id: crash-h2, type: crash, host: h2, at: 0,
     when: {event: workers_started, host: h2, match: {round: 1}}}
"""


def test_torchelastic_a_host_crash_while_new_workers_start_is_blamed_on_that_host() -> None:
    """h1's worker is killed at 9.05 s; every agent restarts and round 1 forms with all
    three hosts. h2 crashes the moment its agent has spawned round 1's worker: h0's and
    h1's new workers wait in the group init for h2's worker, time out after pg_timeout
    (5 s), and round 2 forms with h0 and h1."""
    events, m = run(TORCHELASTIC)
    kill, crash = m.recoveries
    assert m.world_sizes == [3, 3, 2]
    # The kill: h0's worker enters the step-66 allreduce after its 0.1 s sleep and fails at
    # once, naming h1's rank.
    t65 = max(e.t for e in events if e.kind == "step" and e.get("step") == 65
              and e.get("round") == 0)
    assert kill.detected_at == pytest.approx(t65 + STEP, abs=EXACT) and "(h1)" in kill.seen
    # The crash: the surviving workers start PROCESS_START (1.3 s) after the crash (same
    # instant as h2's spawn, within the agents' store round trips), then wait pg_timeout.
    assert "group init CollectiveTimeout" in crash.seen
    detect = crash.phases()["detect"]
    assert PROCESS_START + 5.0 - STORE_SLACK <= detect <= PROCESS_START + 5.0 + STORE_SLACK  # type: ignore[operator]
    # Both end with round 2's first step: new workers start (1.3 s), init and sync (a few
    # ms), then one step of W=2 (0.1003 s).
    for rec in (kill, crash):
        assert rec.new_round == 2
        ph = rec.phases()
        assert PROCESS_START <= ph["sync"] <= PROCESS_START + 0.002  # type: ignore[operator]
        assert ph["first_step"] == pytest.approx(period(2), abs=EXACT)
    assert kill.first_step_at == crash.first_step_at
    # Round 2 forms after the agents see their workers fail (their exit, PROCESS_EXIT, then
    # the monitor, 0.1 s), a last call (1 s) and at most one more poll of the cached state
    # (1 s).
    gap = m.rounds[2].formed_at - crash.detected_at  # type: ignore[operator]
    assert LAST_CALL <= gap <= LAST_CALL + PROCESS_EXIT + 0.1 + 1.0 + STORE_SLACK
    # One rollback: the job had reached step 65, round 2 restores checkpoint 60.
    assert (kill.lost_steps, crash.lost_steps, m.lost_steps) == (5, 0, 5)


def test_a_single_fault_keeps_the_readme_figures() -> None:
    """scale_down.yaml as shipped: h3's crash costs 1.233 s and 5 steps. (Since the static
    rendezvous reads its arrivals with one multi_get, round 0 forms earlier, so the crash at
    2.55 s falls at another point of a step: detection 0.100 s, 5 steps lost, against
    0.023 s and 4 with one store read per arrival.)"""
    _, m, _ = simulate(load("scenarios/scale_down.yaml"), 0)
    (rec,) = m.recoveries
    assert rec.recovery_s == pytest.approx(1.233211, abs=EXACT)
    assert rec.phases() == pytest.approx({"detect": 0.10005, "rendezvous": 1.027363,
                                          "sync": 0.004699, "first_step": 0.1011}, abs=EXACT)
    assert rec.lost_steps == 5 == m.lost_steps
