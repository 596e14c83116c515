"""The direct level: the whole horizon simulated as one run of the faithful model (the
job's pool as hosts, every failure of the arrivals injected as its fault), read back into
the same :class:`~elastic_sim.study.outcome.Run` the composed level makes.

A job that dies is resubmitted here, between simulator runs, as the scheduler would: a
fresh run of the remaining horizon starts ``resubmit`` seconds later (its hosts each up
once its downtime is over), training from the last checkpoint the dead job wrote (the
simulator's new job starts from step 0; a job of fixed work has the steps its checkpoints
do not hold left to do). Checkpoint writes are
not simulated: the training time is split between training and writing in the ratio of
the checkpoint interval to its write time.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any

from elastic_sim.reports.metrics import goodput
from elastic_sim.scenario_model import PROCESS_START
from elastic_sim.study.compose import START
from elastic_sim.study.failures import Cause, Failure
from elastic_sim.study.load import DIRECT_ONLY, Job
from elastic_sim.study.outcome import Run, Timeline
from elastic_sim.study.samples import STORE_HOST, fault_entry, read_window, recovery_bound

CPU_PER_SIM_S = 0.0005
"""CPU seconds a simulated second costs an 8-node job at the sparse checkpoints of a
study (measured on the 2-core development host: 8 nodes, 6 simulated hours, about 12 CPU
seconds); it grows about as nodes^1.3 (``benchmarks/results/README.md``)."""


def direct_cost(job: Job, horizon: float) -> float:
    """Estimated CPU seconds of one direct run of ``job`` over ``horizon``."""
    return float(CPU_PER_SIM_S * horizon * (job.pool / 8) ** 1.3
                 * (job.gpus_per_node / 8) ** 0.3)


@dataclass
class Segment:
    """One simulator run of the job (its first, or one after a resubmission)."""

    start: float
    end: float
    died: bool
    completed: bool
    cpu_s: float


LIGHTHOUSE = "lh"
"""torchft's Lighthouse host in the direct level's runs: a host of its own that no failure
of the job's nodes hits (the job's nodes are its replica groups)."""
WORKER = {"torchft": "rank0"}
"""A protocol's first worker process on a node, by protocol (default ``w0``): what a
failure of effect ``process`` kills."""


def direct_scenario(job: Job, failures: list[Failure], causes: dict[str, Cause],
                    horizon: float, up_at: list[float], seed: int,
                    rng: random.Random, done_steps: int = 0) -> dict[str, Any]:
    """The scenario of one segment: the pool's hosts (each starting once it is up, the
    job's first spread over its start spread), the failures as faults. A torchft job's
    Lighthouse runs on a host of its own, up from the start; every node is a replica
    group, and a replica group's ranks heal from a live peer (its start-up costs the
    restart overhead and the checkpoint load: the heal moves the same state). A job of
    fixed work that already checkpointed ``done_steps`` steps has only the rest to do."""
    w = job.workload
    hosts = []
    ft = job.protocol == "torchft"
    if ft:
        hosts.append({"name": LIGHTHOUSE, "start_at": 0.0})
    for i in range(job.pool):
        stagger = (i * w.start_spread / job.nodes) if i < job.nodes else w.start_spread + 1.0
        hosts.append({"name": f"h{i}", "start_at": round(max(up_at[i], 0.0) + stagger, 6)})
    faults = []
    for k, f in enumerate(failures):
        eff = causes[f.cause].effect
        host = f.host if f.host is not None else rng.randrange(job.nodes)
        entry = fault_entry(eff.kind, f"h{host}", f.downtime, eff.returns, f"{f.cause}-{k}",
                            WORKER.get(job.protocol, "w0"))
        faults.append({**entry, "at": round(f.t, 6)})
    step_time = w.step_time + w.step_overhead
    steps = (max(1, w.steps - done_steps) if w.steps is not None
             else math.ceil(horizon / step_time) + 1)
    return {
        "name": "study-direct", "seed": seed, "time_limit": round(horizon, 6),
        "protocol": {"name": job.protocol, "knobs": dict(job.knobs)},
        "cluster": {"hosts": hosts, "store_host": LIGHTHOUSE if ft else STORE_HOST,
                    "device": job.device,
                    "process_start": max(PROCESS_START, job.restart_cost)},
        "workload": {"steps": steps, "step_time": round(step_time, 9),
                     "commit_every": job.commit_steps, "state_bytes": 1024},
        "faults": faults,
    }


def run_direct(job: Job, causes: tuple[Cause, ...], failures: list[Failure], horizon: float,
               seed: int) -> tuple[Run, list[Segment]]:
    """The job over ``horizon`` under ``failures``, simulated; resubmitted after each death
    when the study says so."""
    from elastic_sim.pipeline import simulate
    from elastic_sim.scenario import parse_scenario

    by_name = {c.name: c for c in causes}
    rng = random.Random(f"{seed}/direct")
    up_at = [0.0] * job.pool
    tl = Timeline()
    useful = checkpoint = overhead = 0.0
    lost: dict[str, float] = {}
    degraded: dict[str, float] = {}
    recoveries: list[tuple[str, float]] = []
    segments: list[Segment] = []
    fate, fate_at = "running", None
    given_up = 0
    t0 = 0.0
    done_steps = 0  # a job of fixed work: steps its checkpoints hold (a resubmission resumes)
    write_share = job.workload.checkpoint_write / (
        job.commit_steps * job.workload.step_time + job.workload.checkpoint_write)
    while t0 < horizon:
        mine = [Failure(f.t - t0, f.host, f.cause, f.downtime) for f in failures
                if t0 <= f.t < horizon]
        scenario = direct_scenario(job, mine, by_name, horizon - t0,
                                   [u - t0 for u in up_at], seed, rng, done_steps)
        sc = parse_scenario(scenario, "<study direct>")
        c0 = time.process_time()
        hist, metrics, result = simulate(sc, seed)
        cpu = time.process_time() - c0
        backs = metrics.rollbacks
        cut = result.hung and hist.occurs("step", result.end_time - 3 * job.workload.step_time,
                                          result.end_time)
        if cut:  # training when the horizon cut it: its work since the checkpoint counts
            backs = [rb for rb in backs if rb.round is not None]
        good = goodput(hist, metrics.rounds, result.end_time, metrics.stalls, backs)
        # a step's overhead is not training: it shares the step time as writes share it
        work = good.useful_s * job.workload.step_time / (job.workload.step_time
                                                         + job.workload.step_overhead)
        overhead += good.useful_s - work
        useful += work * (1 - write_share)
        checkpoint += work * write_share
        if not segments:
            first = next((r for r in metrics.rounds if r.first_step_at is not None), None)
            tl.add(0.0, first.first_step_at if first and first.first_step_at else
                   result.end_time, START, "start")
        names = {f"{f.cause}-{k}": f for k, f in enumerate(mine)}
        for rb in backs:
            f = names.get(rb.fault or "")
            cause = f.cause if f is not None else _last_cause(mine, rb.at)
            lost[cause] = lost.get(cause, 0.0) + rb.lost * job.workload.step_time
        if job.protocol in DIRECT_ONLY:
            given_up += sum(str(ev.get("error", "")).startswith("replica group")
                            for ev in hist.of("job_failed"))
            for cause, s in _charge_trained_on(job, hist, metrics, mine, t0, tl,
                                               recoveries).items():
                s = min(s, useful + checkpoint)  # what the segment trained at most
                degraded[cause] = degraded.get(cause, 0.0) + s
                useful -= s * (1 - write_share)
                checkpoint -= s * write_share
        else:
            _charge(job, hist, metrics, mine, by_name, t0, tl, recoveries,
                    None if result.hung else result.end_time)
        end = t0 + result.end_time
        stuck = tl.intervals[-1] if tl.intervals and tl.intervals[-1].category == "job down" \
            else None
        stall = job.workload.stall_timeout
        if stuck is not None and stall is None:
            fate, fate_at = "hung", stuck.start
            break
        completed = metrics.outcome == "completed"
        died = not completed and not result.hung
        if stuck is not None and stall is not None:  # the watchdog kills it
            tl.cut(stuck.start)
            end = tl.add(stuck.start, stall, stuck.cause, "job failure")
            died = end < horizon
        for f in mine:  # hosts down past the segment's end stay down for the next
            eff = by_name[f.cause].effect
            if eff.takes_host and f.t + t0 < end:
                back = f.t + t0 + f.downtime if eff.returns else float("inf")
                up_at[f.host if f.host is not None else 0] = back
        segments.append(Segment(t0, end, died, completed, round(cpu, 3)))
        if completed:
            fate, fate_at = "completed", end
            break
        if not died:
            break
        resubmit = job.workload.resubmit
        cause = _last_cause(mine, end - t0)
        done_steps += max([rb.restored for rb in metrics.rollbacks if rb.round is None]
                          or [_committed(hist)])
        if resubmit is None:
            fate, fate_at = "failed", end
            tl.add(end, horizon - end, cause, "job down")
            break
        x = tl.add(end, resubmit, cause, "resubmit")
        ready = sorted(max(u, x) for u in up_at)[job.nodes - 1]
        if ready == float("inf"):
            fate, fate_at = "out of nodes", x
            tl.add(x, horizon - x, cause, "job down")
            break
        tl.add(x, ready - x, cause, "capacity")
        t0 = ready
    end_t = fate_at if fate == "completed" and fate_at is not None else horizon
    deaths = sum(s.died for s in segments)
    return Run(end_t, useful, checkpoint, lost, tl.intervals, recoveries, fate, fate_at,
               len([f for f in failures if f.t < end_t]), deaths, degraded,
               overhead, given_up), segments


def _charge_trained_on(job: Job, hist: Any, metrics: Any, failures: list[Failure],
                       t0: float, tl: Timeline,
                       recoveries: list[tuple[str, float]]) -> dict[str, float]:
    """Each failure's cost in a segment of a job that trains on through it (torchft):
    the survivors' stall, from the failure until they step again (its detection, the
    quorum without the failed replica group, the first step in it), as the job's time;
    and, by cause, the node-time the failed replica group was missing while the others
    trained (until its ranks stepped again, healed, or the segment ended) over the job's
    nodes: the share of the GPUs that did no training then."""
    recs = {r.id: r for r in metrics.recoveries}
    steps = hist.of("step")
    resumed = -1.0
    missing: dict[str, float] = {}
    gone_until: dict[str, float] = {}  # a host's replica group is missing until then
    for k, f in enumerate(failures):
        rec = recs.get(f"{f.cause}-{k}")
        if rec is None:
            continue
        host = rec.target.split("/", 1)[0]
        start = max(rec.at, gone_until.get(host, rec.at))  # not twice for one absence
        back = next((ev.t for ev in steps if ev.t > rec.at and ev.host == host),
                    metrics.end_time)
        if back > start:
            gone_until[host] = back
            trained = (back - start) - sum(max(0.0, min(back, st.end) - max(start, st.start))
                                           for st in metrics.stalls)
            missing[f.cause] = missing.get(f.cause, 0.0) + max(0.0, trained) / job.nodes
        if rec.first_step_at is None or rec.at < resumed:
            continue  # trained on without a stall, or within another failure's
        ph = rec.phases()
        x = tl.add(t0 + rec.at, ph.get("detect") or 0.0, f.cause, "detection")
        x = tl.add(x, ph.get("rendezvous") or 0.0, f.cause, "rendezvous")
        tl.add(x, rec.first_step_at - (x - t0), f.cause, "restart")
        recoveries.append((f.cause, rec.first_step_at - rec.at))
        resumed = rec.first_step_at
    return missing


def _committed(hist: Any) -> int:
    """The last step a segment's job checkpointed (0: none)."""
    return max((int(ev.get("step") or 0) for ev in hist.of("commit")), default=0)


def _last_cause(failures: list[Failure], before: float) -> str:
    earlier = [f for f in failures if f.t <= before]
    return earlier[-1].cause if earlier else "unattributed"


def _charge(job: Job, hist: Any, metrics: Any, failures: list[Failure],
            causes: dict[str, Cause], t0: float, tl: Timeline,
            recoveries: list[tuple[str, float]],
            ended: float | None) -> None:
    """Each failure's recovery in a segment, as the composed level charges it: its phases
    from its own time, or what it added to a recovery under way (overlap); a job that
    never trained again after it, until its end (``ended``; None: the segment's time
    limit, the job stuck)."""
    fired = {str(ev.get("id")): ev.t for ev in hist.of("fault") if ev.get("phase") == "start"}
    resumed = -1.0
    for k, f in enumerate(failures):
        t_f = fired.get(f"{f.cause}-{k}")
        if t_f is None:
            continue
        eff = causes[f.cause].effect
        host = f"h{f.host}" if f.host is not None else "?"
        back = f.downtime if eff.takes_host and eff.returns else None
        rec = read_window(hist, metrics, t_f, host, back, ended=ended)
        if rec.get("restart") is None:
            if t_f < resumed:
                tl.cut(t0 + t_f)
            x = tl.add(t0 + t_f, rec.get("detect") or 0.0, f.cause, "detection")
            left = metrics.end_time - (x - t0)
            if rec.get("hung") and metrics.end_time - t_f < recovery_bound(job, f.downtime):
                later = any(r.formed_at > t_f for r in metrics.rounds)  # cut by the horizon
                tl.add(x, left, f.cause, "restart" if later else "rendezvous")
            elif rec.get("hung"):
                tl.add(x, left, f.cause, "job down")
            else:
                died = rec.get("died_after") or 0.0
                tl.add(x, max(0.0, died - (rec.get("detect") or 0.0)), f.cause, "job failure")
            break
        end = t_f + rec["detect"] + rec["capacity"] + rec["rendezvous"] + rec["restart"]
        if t_f < resumed:  # a recovery under way: what it added
            if end > resumed:
                tl.add(t0 + resumed, end - resumed, f.cause, "overlap")
                resumed = end
            continue
        x = tl.add(t0 + t_f, rec["detect"], f.cause, "detection")
        x = tl.add(x, rec["capacity"], f.cause, "capacity")
        x = tl.add(x, rec["rendezvous"], f.cause, "rendezvous")
        tl.add(x, rec["restart"], f.cause, "restart")
        recoveries.append((f.cause, end - t_f))
        resumed = end
