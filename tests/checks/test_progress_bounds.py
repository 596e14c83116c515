"""progress_after_faults' bounds: each phase of a recovery counted once (torchelastic's
process-group timeout entered both the detection and the settle time: 3,725 s with
upstream's defaults), a member's death judged by what the protocol could see of it (its
heartbeat expiry, polls and last call), not by the timeout its survivors waited out, and no
fault judged once the job had failed; and the time a run gets follows that bound (a run
cut short within it is not called a hang)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from elastic_sim.checks.facts import limits_of
from elastic_sim.checks.liveness import progress_after_faults, terminates
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs
from elastic_sim.scenario import parse_scenario
from elastic_sim.trace import TraceEvent
from elastic_sim.world import GLOO

ROOT = Path(__file__).resolve().parents[2]

KNOBS = {"min_nodes": 2, "max_nodes": 3, "max_restarts": 3, "keep_alive_interval": 5.0,
         "keep_alive_max_attempt": 3, "last_call_timeout": 30.0, "monitor_interval": 0.1,
         "pg_timeout": 1800.0, "read_timeout": 60.0, "join_timeout": 600.0,
         "stop_timeout": 30.0, "heartbeat_timeout": 5.0}


def ev(t: float, host: str, kind: str, proc: str = "", **data: Any) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def fault(t: float, type_: str, target: Any, phase: str = "start") -> TraceEvent:
    return TraceEvent(t, "*", "fault-injector", "fault",
                      {"id": f"x-{type_}", "type": type_, "target": target, "phase": phase})


def died_at_one(type_: str, resumed: float, outcome: str = "completed") -> list[TraceEvent]:
    """Three hosts form round 0 at 1 s; ``type_`` takes h2 down at 1.1 s; h0 and h1 form
    round 1 at ``resumed`` and step once right after."""
    hosts = ("h0", "h1", "h2")
    return [ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0",
               protocol="torchelastic", knobs=KNOBS),
            *(ev(0.0, h, "proc_start") for h in hosts),
            *(ev(1.0, h, "rdzv_done", round=0, members=list(hosts), rank=i, world_size=3)
              for i, h in enumerate(hosts)),
            fault(1.1, type_, "h2"), ev(1.1, "h2", "proc_exit", code=-9, reason="host crashed"),
            ev(resumed, "h0", "rdzv_complete", round=1, members=["h0", "h1"]),
            *(ev(resumed, h, "rdzv_done", round=1, members=["h0", "h1"], rank=i,
                 world_size=2) for i, h in enumerate(("h0", "h1"))),
            ev(resumed + 2, "h0", "step", round=1, step=1),
            ev(resumed + 3, "h0", "job_done", step=1),
            ev(resumed + 3, "*", "run_end", "elastic-sim", outcome=outcome)]


def test_the_group_timeout_counts_once_in_torchelastics_progress_bound() -> None:
    defaults = {k: getattr(TorchElasticKnobs(), k) for k in KNOBS}
    assert defaults["pg_timeout"] is None  # the backend's: on cluster.device cpu, Gloo's
    defaults["pg_timeout"] = GLOO.default_timeout
    limits = limits_of(defaults, "torchelastic")
    assert limits is not None
    # 1,800 s (group timeout) + 30 s (stop) + 600 s (join timeout): it was 3,725 s
    assert limits.progress_s == 1800.0 + 30.0 + 600.0
    assert limits.rejoin_s == 15.0 + 30.0 + 2 * (0.1 + 1.0 + 1.0) + 0.3


def test_survivors_that_wait_out_the_group_timeout_after_a_death_are_caught() -> None:
    for type_ in ("crash", "power_off"):
        res = progress_after_faults(died_at_one(type_, resumed=1831.0))
        assert not res.ok, type_
        (v,) = res.violations
        assert v.message.startswith(f"h2 (x-{type_}, {type_}) died at 1.1 s with 2 hosts able")
        assert "no new world formed and no step came within 49.5 s" in v.message
        assert "keep_alive_interval x keep_alive_max_attempt 15 s" in v.message
        assert "last_call_timeout 30 s" in v.message
        assert "(next: rdzv_complete at 1831 s)" in v.message
        assert [(e.host, e.kind) for e in v.witness] == [
            ("*", "fault"), ("h2", "proc_exit"), ("h0", "rdzv_complete")]


def test_survivors_that_re_form_once_the_heartbeat_expired_pass() -> None:
    res = progress_after_faults(died_at_one("crash", resumed=47.0))
    assert res.ok and res.checked == 2  # the death, and the fault's start


def test_a_death_that_leaves_too_few_hosts_is_judged_by_the_progress_bound_only() -> None:
    h = [e for e in died_at_one("crash", resumed=1831.0)]
    h[0] = ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0",
              protocol="torchelastic", knobs={**KNOBS, "min_nodes": 3})
    res = progress_after_faults(h)
    assert res.ok and res.checked == 1


def test_a_fault_after_the_job_failed_is_not_judged() -> None:
    hosts = ("h0", "h1")
    h = [ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0",
            protocol="torchelastic", knobs=KNOBS),
         *(ev(0.0, x, "proc_start") for x in hosts),
         fault(1.0, "clock_skew", "h1"), ev(2.0, "h0", "step", round=0, step=1),
         ev(3.0, "h0", "job_failed", error="StoreTimeout"),
         fault(3.5, "clock_jump", "h1"),
         ev(4.0, "*", "run_end", "elastic-sim", outcome="failed")]
    res = progress_after_faults(h)
    assert res.ok and res.checked == 1
    h[-2] = fault(2.5, "clock_jump", "h1")  # before the failure: judged, and the failure
    res = progress_after_faults(sorted(h, key=lambda e: e.t))  # was avoidable
    assert not res.ok and "x-clock_jump started at 2.5 s" in res.violations[0].message
    assert "the bound: max(pg_timeout 1800 s, read_timeout 60 s)" in res.violations[0].message


def test_a_run_cut_short_within_the_progress_bound_says_so_instead_of_hanging() -> None:
    """Two process-group timeouts in a row (torchrun's defaults) outlast a 3,600 s limit
    on a job that would have finished: its hang is not judged, and the check says why."""
    h = [e for e in died_at_one("power_off", resumed=1831.0) if e.t < 1000]
    cut = [*h, ev(1000.0, "*", "run_end", "elastic-sim", outcome="hung")]
    res = terminates(cut)
    assert res.status == "n/a" and res.checked == 0
    assert res.not_judged.startswith("the time limit (1000 s) came 998.9 s after x-power_off "
                                     "started, within the 2430 s the knobs allow a recovery")
    late = [*h, ev(2500.0, "*", "run_end", "elastic-sim", outcome="hung")]
    assert not terminates(late).ok  # past the bound: a hang
    gone = [*h, fault(2.0, "crash", "h0"), ev(2.0, "h0", "proc_exit", code=-9),
            ev(1000.0, "*", "run_end", "elastic-sim", outcome="hung")]
    assert not terminates(gone).ok  # the coordinator is gone: nothing recovers the job


def test_the_default_time_limit_follows_the_progress_bound() -> None:
    raw = yaml.safe_load((ROOT / "scenarios" / "torchelastic" /
                          "two_group_timeouts_in_a_row.yaml").read_text(encoding="utf-8"))
    assert "time_limit" not in raw
    sc = parse_scenario(raw, "<two timeouts>")
    assert sc.time_limit is None and sc.run_time_limit() == 2 * 2430.0
    assert parse_scenario({**raw, "faults": []}, "<none>").run_time_limit() == 3600.0
    assert parse_scenario({**raw, "time_limit": 60}, "<set>").run_time_limit() == 60.0


def test_a_fault_that_heals_once_the_job_has_its_result_is_not_judged() -> None:
    """The job completes at 50 s; a clock skew of h1 heals at 60 s, and a host restarted
    long after fails at 3,000 s (past the 2,430 s bound) on the store the finished job no
    longer serves. Nothing was left to progress after 50 s. The same skew before the
    completion is judged."""
    h = [e for e in died_at_one("crash", resumed=47.0) if e.kind != "run_end"]
    later = [fault(55.0, "clock_skew", "h1"), fault(60.0, "clock_skew", "h1", "heal"),
             ev(2940.0, "h2", "proc_start"),
             ev(3000.0, "h2", "job_failed", error="store unreachable"),
             ev(3000.1, "*", "run_end", "elastic-sim", outcome="completed")]
    res = progress_after_faults([*h, *later])
    assert res.ok and res.checked == 2  # the crash at 1.1 s and the death it caused
    early = [e for e in h if e.kind != "job_done"]
    before = sorted([*early, fault(2.0, "clock_skew", "h1"),
                     fault(3.0, "clock_skew", "h1", "heal"), *later[2:]], key=lambda e: e.t)
    assert progress_after_faults(before).checked == 4


def test_the_survivors_step_at_the_instant_of_the_death_is_not_progress_after_it() -> None:
    """h2 is powered off as it reports a step (a fault its step triggers): h0 and h1 report
    the same allreduce's step at that instant, before the death. They then wait for the
    group's timeout: caught, as when no step shares the death's instant."""
    h = died_at_one("power_off", resumed=1831.0)
    steps = [ev(1.1, x, "step", round=0, step=20) for x in ("h0", "h1", "h2")]
    at = next(i for i, e in enumerate(h) if e.kind == "fault")
    h = [*h[:at], *steps, *h[at:]]
    res = progress_after_faults(h)
    assert not res.ok
    assert res.violations[0].message.startswith("h2 (x-power_off, power_off) died at 1.1 s")


def test_a_death_once_the_survivors_workers_are_done_needs_no_new_world() -> None:
    """h2 dies as the workers exit 0 at the job's end (the agents have yet to say
    job_done): nothing is left to train, so nobody needs to re-form."""
    h = died_at_one("crash", resumed=1831.0)
    h = [e for e in h if e.t <= 1.1 or e.kind == "run_end"]
    workers = [ev(1.05, x, "proc_exit", f"{x}/w0", code=0) for x in ("h0", "h1", "h2")]
    h = sorted([*h, *workers], key=lambda e: e.t)
    res = progress_after_faults(h)
    assert res.ok and res.checked == 1  # only the fault's start: no death to judge


def test_a_host_restarted_after_the_job_completed_may_wait_out_its_join_timeout() -> None:
    h = [e for e in died_at_one("crash", resumed=47.0) if e.kind != "run_end"]
    h += [ev(60.0, "h2", "proc_start"), ev(60.1, "h2", "rdzv_join", round=0),
          ev(300.0, "*", "run_end", "elastic-sim", outcome="hung")]
    res = terminates(h)
    assert res.status == "n/a" and "after h2's first process started again after the job " \
        "completed" in res.not_judged


def test_a_slowed_first_process_that_begins_after_the_completion_may_wait_too() -> None:
    """h2's new process started (proc_start) before the job completed at 50 s, but a
    slow_start delayed its entry by 30 s: it begins after the completion, so it may wait
    out its join timeout as one started then would (the trace's ``slowed`` says when it
    began). Without that delay, the process was running long before: a hang."""
    h = [e for e in died_at_one("crash", resumed=47.0) if e.kind != "run_end"]
    end = ev(300.0, "*", "run_end", "elastic-sim", outcome="hung")
    slowed = sorted([*h, ev(40.0, "h2", "proc_start", slowed=30.0), end], key=lambda e: e.t)
    res = terminates(slowed)
    assert res.status == "n/a" and res.not_judged.startswith(
        "the time limit (300 s) came 230 s after h2's first process started again after "
        "the job completed")
    plain = sorted([*h, ev(40.0, "h2", "proc_start"), end], key=lambda e: e.t)
    assert not terminates(plain).ok
    # the coordinator (h0) gone once the job completed: the late process still only waits
    gone = sorted([*h, ev(40.0, "h2", "proc_start", slowed=30.0),
                   ev(51.0, "h0", "proc_exit", code=0), end], key=lambda e: e.t)
    assert terminates(gone).status == "n/a"


def test_a_run_cut_short_while_failures_still_spend_restarts_says_so() -> None:
    """The survivors wait out a 1,800 s group timeout, restart for the failure (restarts
    left) and wait again, until the budget ends the job (about 5,400 s): a 3,600 s limit
    cuts that short, more than the bound after the fault but within it after the last
    failure restart. With no restart left, or a restart for a waiting node (spending
    none), the hang is judged."""
    base = [e for e in died_at_one("crash", resumed=1831.0) if e.t < 1000]

    def cut(**restart: Any) -> list[TraceEvent]:
        return sorted([*base, ev(1802.0, "h0", "agent_restart", **restart),
                       ev(3600.0, "*", "run_end", "elastic-sim", outcome="hung")],
                      key=lambda e: e.t)

    res = terminates(cut(reason="FAILED", remaining_restarts=2))
    assert res.status == "n/a" and res.not_judged.startswith(
        "the time limit (3600 s) came 1798 s after h0's agent restarted for a failure with "
        "2 restart(s) left, within the 2430 s")
    assert not terminates(cut(reason="FAILED", remaining_restarts=0)).ok
    assert not terminates(cut(reason="nodes_waiting", remaining_restarts=2)).ok
    assert not terminates([*base, ev(3600.0, "*", "run_end", "elastic-sim",
                                     outcome="hung")]).ok  # no restart: judged as before


def _outage(type_: str, target: Any, heal: float | None) -> list[TraceEvent]:
    """Three hosts (h0 the coordinator) train from 1 s; a fault on ``target`` from 3 s,
    healing at ``heal`` (None: never); the job steps again 10 s after 3,003 s."""
    hosts = ("h0", "h1", "h2")
    out = [ev(0.0, "*", "run_start", "elastic-sim", coordinator="h0", protocol="torchelastic",
              knobs=KNOBS),
           *(ev(0.0, h, "proc_start") for h in hosts),
           *(ev(1.0, h, "rdzv_done", round=0, members=list(hosts), rank=i, world_size=3)
             for i, h in enumerate(hosts)),
           ev(2.0, "h0", "step", round=0, step=1),
           fault(3.0, type_, target)]
    if heal is not None:
        out.append(fault(heal, type_, target, "heal"))
    return [*out, ev(3013.0, "h0", "step", round=0, step=2),
            ev(3014.0, "h0", "job_done", step=2),
            ev(3014.0, "*", "run_end", "elastic-sim", outcome="completed")]


def test_an_outage_of_the_coordinators_host_is_judged_from_its_heal() -> None:
    """Nothing can progress while the coordinator's host is frozen or cut off alone: a
    3,000 s outage (past the 2,430 s bound) followed by a step 10 s after it heals is no
    violation; the same fault on another host, or one that never heals, is judged from its
    start."""
    limits = limits_of(KNOBS, "torchelastic")
    assert limits is not None and 3000.0 > limits.progress_s
    bound = limits.progress_s
    for type_, target in (("hang", "h0"), ("isolate", [["h0"], ["h1", "h2"]]),
                          ("partition", [["h1", "h2"], ["h0"]])):
        res = progress_after_faults(_outage(type_, target, 3003.0))
        assert res.ok and res.checked == 1, (type_, res.violations)  # the heal alone
    for type_, target, heal in (("hang", "h1", 3003.0),
                                ("partition", [["h0", "h1"], ["h2"]], 3003.0),
                                ("isolate", [["h0"], ["h1", "h2"]], None)):
        res = progress_after_faults(_outage(type_, target, heal))
        assert [v.message.split(" (")[0] for v in res.violations] == [
            f"no progress within {bound:g} s after x-{type_} started at 3 s"], (type_, target)
