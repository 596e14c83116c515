"""Metrics from a trace: rounds and their membership, and for every fault how long the
job took to detect it, re-form, sync and train again, and how much progress it lost.

Faults are blamed causally (:mod:`elastic_sim.reports.causes`): a fault's detection is the first
failure a survivor saw that names what the fault hit, so overlapping faults each get their
own figures. A fault that needed a recovery runs from its start to the first step of the
first world that trained after its detection; one that needed none reports the stall it
caused (:mod:`elastic_sim.reports.progress`). Lost steps are counted once per rollback."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from elastic_sim.history import Key, Stretch, history, merged
from elastic_sim.reports.causes import Observation, detections, fault_hits
from elastic_sim.reports.progress import (
    Rollback,
    Stall,
    blame_stalls,
    no_progress,
    rollbacks,
    round_progress,
)
from elastic_sim.trace import TraceEvent

Outcome = Literal["completed", "failed", "hung"]
PHASE_NAMES = {"detect": "detect", "rendezvous": "rendezvous", "sync": "sync",
               "first_step": "first step"}
"""A recovery's phases (:meth:`Recovery.phases`), with the name every report shows: the
console, report.html, summary.json and ``compare`` name them alike."""


@dataclass
class RoundInfo:
    """A formed round: who, with which ranks, when."""

    round: int
    members: list[str]
    ranks: dict[str, int]
    world_size: int
    formed_at: float
    """When the last member learned the membership."""
    first_step_at: float | None = None
    steps: int = 0
    """Steps completed in this round (by its rank 0, or its lowest reporting rank)."""
    processes: int = 0
    """Training processes of its world (torchrun's ``WORLD_SIZE``, Horovod's size): its
    members (a protocol whose members are ranks lists a host once per rank), or the
    processes that adopted its state (a ``sync``: a node's several workers), whichever
    is more."""
    nodes: int = 0
    """Distinct hosts among its members."""


@dataclass
class Recovery:
    """What one fault cost."""

    id: str
    type: str
    target: str
    at: float
    detected_at: float | None = None
    rendezvous_at: float | None = None
    synced_at: float | None = None
    first_step_at: float | None = None
    lost_steps: int = 0
    """Steps re-executed by the rollbacks of this fault's recovery."""
    new_round: int | None = None
    stall_s: float = 0.0
    """No-progress time blamed on this fault (:attr:`Metrics.stalls`): its recovery's and
    any stall it caused outside one (the whole cost of a fault that needed no
    reconfiguration, and of one the job never recovered from)."""
    seen: str = ""
    """The failure by which the job first saw this fault (empty: nobody saw it)."""

    @property
    def needed_recovery(self) -> bool:
        """Whether a survivor saw this fault (its failure named what the fault hit)."""
        return self.detected_at is not None

    @property
    def recovery_s(self) -> float | None:
        """Fault to the first training step of the new world."""
        return None if self.first_step_at is None else self.first_step_at - self.at

    def phases(self) -> dict[str, float | None]:
        """Seconds spent detecting, re-forming, syncing, and until the first step."""

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else max(0.0, b - a)

        return {
            "detect": span(self.at, self.detected_at),
            "rendezvous": span(self.detected_at, self.rendezvous_at),
            "sync": span(self.rendezvous_at, self.synced_at),
            "first_step": span(self.synced_at, self.first_step_at),
        }


@dataclass
class Metrics:
    """Everything summary.json reports about a run's progress."""

    outcome: Outcome
    rounds: list[RoundInfo]
    recoveries: list[Recovery]
    steps_done: int
    final_world_size: int
    end_time: float
    failed_procs: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    batch_size: int = 1
    """Samples per rank per step (from the workload)."""
    stalls: list[Stall] = field(default_factory=list)
    """Intervals with live members and no training progress, each with its cause."""
    rollbacks: list[Rollback] = field(default_factory=list)
    steps_total: int = 0
    """The job's steps (the workload's)."""

    @property
    def unfinished_steps(self) -> int:
        """Steps a job that did not complete never did (0 for one that did)."""
        return 0 if self.outcome == "completed" else max(0, self.steps_total - self.steps_done)

    @property
    def world_sizes(self) -> list[int]:
        """World size of every round, in order."""
        return [r.world_size for r in self.rounds]

    @property
    def lost_steps(self) -> int:
        """Steps re-executed, once per rollback (whichever fault, if any, caused it)."""
        return sum(rb.lost for rb in self.rollbacks)

    @property
    def lost_samples(self) -> int:
        """Samples thrown away: each rollback's steps x the processes of the world whose
        steps it lost x samples per process per step."""
        return sum(rb.lost * _processes_before(rb, self.rounds) * self.batch_size
                   for rb in self.rollbacks)

    @property
    def stalled_s(self) -> float:
        """Seconds with live members and no training progress (recoveries included)."""
        return sum(st.duration for st in self.stalls)

    @property
    def max_recovery_s(self) -> float | None:
        """The slowest recovery (None if no fault disrupted training)."""
        vals = [r.recovery_s for r in self.recoveries if r.recovery_s is not None]
        return max(vals) if vals else None

    def to_json(self) -> dict[str, Any]:
        """Plain data for summary.json."""
        return {
            "outcome": self.outcome,
            "steps_done": self.steps_done,
            "final_world_size": self.final_world_size,
            "world_sizes": self.world_sizes,
            "lost_steps": self.lost_steps,
            "lost_samples": self.lost_samples,
            "unfinished_steps": self.unfinished_steps,
            "stalled_s": _r(self.stalled_s),
            "stalls": [{"start": _r(st.start), "end": _r(st.end), "cause": st.cause,
                        "recovering": st.recovering} for st in self.stalls],
            "rollbacks": [asdict(rb) | {"at": _r(rb.at), "lost": rb.lost}
                          for rb in self.rollbacks],
            "max_recovery_s": _r(self.max_recovery_s),
            "end_time": _r(self.end_time),
            "failed_procs": self.failed_procs,
            "errors": self.errors,
            "rounds": [asdict(r) | {"formed_at": _r(r.formed_at),
                                    "first_step_at": _r(r.first_step_at)} for r in self.rounds],
            "recoveries": [
                {
                    "id": r.id, "type": r.type, "target": r.target, "at": _r(r.at),
                    "new_round": r.new_round, "recovery_s": _r(r.recovery_s),
                    "lost_steps": r.lost_steps,
                    "lost_samples": lost_samples(r, self.rounds, self.batch_size),
                    "stall_s": _r(r.stall_s), "seen": r.seen,
                    "phases": {k: _r(v) for k, v in r.phases().items()},
                }
                for r in self.recoveries
            ],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def rounds_of(events: Sequence[TraceEvent]) -> list[RoundInfo]:
    """Formed rounds in order of their number."""
    hist = history(events)
    formed: dict[int, Key] = {}
    """Each round's first rdzv_done (a stretch of that round normally trains after it)."""
    for key, rd in zip(hist.keys, hist.plain, strict=True):
        if rd.kind == "rdzv_done":
            formed.setdefault(int(rd.get("round")), key)
    blocks: list[tuple[Key, Stretch | TraceEvent]] = []
    for k, b in hist.step_blocks():
        if isinstance(b, Stretch) and formed.get(_round(b), k) > k:  # formed amid its steps
            blocks += [(b.key(j), b.event(j)) for j in b.step_indices()]
        else:
            blocks.append((k, b))
    blocks.sort(key=lambda p: p[0])
    by_round: dict[int, RoundInfo] = {}
    for ev in merged(hist, blocks):
        if isinstance(ev, Stretch):
            info = by_round.get(_round(ev))
            if info is not None:
                if info.first_step_at is None:
                    info.first_step_at = ev.times[2]
                if ev.ev.host == info.members[0]:
                    info.steps += ev.steps
        elif ev.kind == "rdzv_done":
            rnd = int(ev.get("round"))
            info = by_round.get(rnd)
            if info is None:
                members = list(ev.get("members", []))
                info = by_round[rnd] = RoundInfo(rnd, members, {}, len(members), ev.t)
            info.ranks[ev.host] = int(ev.get("rank"))
            info.formed_at = max(info.formed_at, ev.t)
        elif ev.kind == "step":
            info = by_round.get(int(ev.get("round", -1)))
            if info is not None:
                if info.first_step_at is None:
                    info.first_step_at = ev.t
                if ev.host == info.members[0]:
                    info.steps += 1
    syncs: dict[int, set[str]] = {}
    for ev in hist.of("sync"):
        syncs.setdefault(int(ev.get("round", -1)), set()).add(ev.proc)
    for rnd, info in by_round.items():
        info.processes = max(info.world_size, len(syncs.get(rnd, ())))
        info.nodes = len(set(info.members))
    return [by_round[k] for k in sorted(by_round)]


def _round(st: Stretch) -> int:
    """The round of a stretch's steps, as :func:`rounds_of` reads a step's."""
    return int((st.fields or {}).get("round", -1))


def describe(obs: Observation) -> str:
    """An observation in words: who saw what, naming whom."""
    ev = obs.event
    what = ev.kind if ev.kind != "coll_fail" else f"{ev.get('op')} {ev.get('error')}"
    if ev.kind == "group_failed":
        what = f"group init {ev.get('error')}"
    return f"{ev.proc}: {what} ({', '.join(sorted(obs.culprits))})"


def recoveries_of(events: Sequence[TraceEvent], rounds: list[RoundInfo],
                  end: float | None = None) -> tuple[list[Recovery], list[Stall],
                                                     list[Rollback]]:
    """One :class:`Recovery` per fault that started; the run's stalls and rollbacks.

    ``end``: when a job that did not complete ended (None: it completed). A fault's
    recovery round is the first round formed after its detection that trained (a round
    that fell apart before its first step is part of the recovery, not its end)."""
    hits = fault_hits(history(events).of("fault"))
    seen = detections(events, hits)
    training = [r for r in rounds if r.first_step_at is not None]
    out = []
    for f in hits:
        rec = Recovery(f.id, f.type, f.target, f.start)
        obs = seen.get(f.id)
        if obs is not None:
            rec.detected_at, rec.seen = obs.t, describe(obs)
            nxt = next((r for r in training if r.formed_at >= obs.t), None)
            if nxt is not None:
                rec.new_round = nxt.round
                rec.rendezvous_at = nxt.formed_at
                syncs = [e.t for e in history(events).of("sync") if e.get("round") == nxt.round]
                rec.synced_at = max(syncs) if syncs else None
                rec.first_step_at = nxt.first_step_at
        out.append(rec)
    runs = round_progress(events, {r.round: r.ranks for r in rounds})
    backs = _attribute(rollbacks(runs, events, {r.round: r.formed_at for r in rounds}, end),
                       out)
    windows = [(r.at, r.first_step_at if r.first_step_at is not None else
                (end if end is not None else r.at), r.id) for r in out if r.needed_recovery]
    stalls = blame_stalls(no_progress(runs, end), windows, hits)
    for rec in out:
        rec.stall_s = sum(st.duration for st in stalls if st.cause == rec.id)
    return out, stalls, backs


def _attribute(backs: list[Rollback], recs: list[Recovery]) -> list[Rollback]:
    """Each rollback to the first-detected fault whose recovery it belongs to; add its
    steps to that fault's lost steps."""
    by_detection = sorted((r for r in recs if r.detected_at is not None),
                          key=lambda r: (r.detected_at, r.at))
    out = []
    for rb in backs:
        owner = next((r for r in by_detection if r.new_round == rb.round
                      and (rb.round is not None or (r.detected_at or 0.0) <= rb.at)), None)
        if owner is not None:
            owner.lost_steps += rb.lost
            rb = Rollback(rb.round, rb.at, rb.reached, rb.restored, owner.id)
        out.append(rb)
    return out


def _processes_before(rb: Rollback, rounds: Sequence[RoundInfo]) -> int:
    """Processes of the last round formed before a rollback (the one whose steps it lost)."""
    before = [r for r in rounds if r.formed_at < rb.at and (rb.round is None or r.round < rb.round)]
    return max(before, key=lambda r: r.round).processes if before else 0


def outcome_of(done: Iterable[TraceEvent], total_steps: int, hung: bool) -> Outcome:
    """How the run ended: ``hung`` (still going at its end), ``completed`` (a ``job_done``
    of the last step among ``done``) or ``failed``."""
    if hung:
        return "hung"
    return "completed" if any(int(e.get("step", 0)) >= total_steps for e in done) \
        else "failed"


def compute(
    events: Sequence[TraceEvent], total_steps: int, exit_codes: dict[str, int], hung: bool,
    end_time: float, batch_size: int = 1,
) -> Metrics:
    """All metrics of one run (``train_steps`` summaries read as their steps, without
    making them one by one)."""
    events = history(events)
    rounds = rounds_of(events)
    done = events.of("job_done")
    steps_done = max([int(e.get("step", 0)) for e in events.recorded("step")]
                     + [st.first + st.steps - 1 for st in events.stretches if st.step_events],
                     default=0)
    completed = outcome_of(done, total_steps, False) == "completed"
    outcome: Outcome = "hung" if hung else ("completed" if completed else "failed")
    last_round = next((r for r in reversed(rounds) if r.steps > 0), rounds[-1] if rounds else None)
    errors = [f"{e.host}: {e.get('error')}" for e in events.of("job_failed")]
    finished = [e.t for e in events.of("job_done", "job_failed")]
    job_end = None if completed else (max(finished) if finished and not hung else end_time)
    recoveries, stalls, backs = recoveries_of(events, rounds, job_end)
    return Metrics(
        outcome=outcome,
        rounds=rounds,
        recoveries=recoveries,
        stalls=stalls,
        rollbacks=backs,
        steps_done=steps_done,
        final_world_size=last_round.world_size if last_round else 0,
        end_time=end_time,
        failed_procs={p: c for p, c in sorted(exit_codes.items()) if c != 0},
        errors=errors,
        batch_size=batch_size,
        steps_total=total_steps,
    )


# -- derived views for reports: world over time, round durations, goodput, restarts ---------


def world_size_series(rounds: Sequence[RoundInfo]) -> list[tuple[float, int]]:
    """(time the round was formed, its world size in processes), one point per round, in
    time order (:attr:`RoundInfo.world_size` counts its nodes)."""
    return sorted((r.formed_at, r.processes) for r in rounds)


def round_ends(
    events: Sequence[TraceEvent], rounds: Sequence[RoundInfo], end_time: float
) -> dict[int, float]:
    """When each round ended: the first member leaving it for a later round, else the job's
    end (its last job_done, or the end of the run)."""
    first_join: dict[int, float] = {}
    events = history(events)
    for ev in events.of("rdzv_join"):
        if ev.kind == "rdzv_join":
            rnd = int(ev.get("round", -1))
            first_join.setdefault(rnd, ev.t)
    finished = [ev.t for ev in events.of("job_done", "job_failed")]
    job_end = max(finished) if finished else end_time
    out = {}
    for r in rounds:
        later = [t for rnd, t in first_join.items() if rnd > r.round and t >= r.formed_at]
        out[r.round] = min(later) if later else max(job_end, r.formed_at)
    return out


@dataclass(frozen=True)
class Goodput:
    """Useful training time against the time the job took."""

    useful_s: float
    """Step time of the steps that count towards the final model, less any stall inside
    them (time a step spent waiting for a slow, hung or cut-off peer)."""
    wasted_s: float
    """Step time of steps that were rolled back and redone (stalls excluded)."""
    stalled_s: float
    """Time with live members and no training progress (:attr:`Metrics.stalls`):
    recoveries and stalls that no reconfiguration followed."""
    wall_s: float
    """Run time until the job finished (its last job_done or job_failed, else the run end)."""

    @property
    def ratio(self) -> float:
        """Goodput: useful step time over wall time (0..1)."""
        return self.useful_s / self.wall_s if self.wall_s > 0 else 0.0


def goodput(events: Sequence[TraceEvent], rounds: Sequence[RoundInfo], end_time: float,
            stalls: Sequence[Stall] | None = None, backs: Sequence[Rollback] = ()
            ) -> Goodput:
    """Goodput seen by each round's leading process (:func:`round_progress`: a step of the
    job, whichever of a host's workers made it): a step lasts from the process's previous
    step (or its sync) to its step event; a step redone later counts only once, as redone;
    the part of a step that lies in a stall counts as stalled, not as training.
    ``stalls``: :attr:`Metrics.stalls` (None: found here, for a job that completed);
    ``backs``: :attr:`Metrics.rollbacks`, whose progress a job that never trained again
    threw away (its steps since the last commit are wasted, not useful)."""
    runs = round_progress(events, {r.round: r.ranks for r in rounds})
    if stalls is None:
        stalls = [Stall(g.start, g.end, None, False) for g in no_progress(runs, None)]
    formed = {r.round: r.formed_at for r in rounds}
    kept: dict[int, tuple[float, float]] = {}
    redone: list[tuple[float, float]] = []
    for run in runs:  # by round; each round's leading process (one of a host's workers)
        if run.round not in formed:
            continue
        prev = run.synced_at if run.synced_at is not None else formed[run.round]
        for t, step in run.steps:
            if step in kept:
                redone.append(kept[step])
            kept[step] = (min(prev, t), t)
            prev = t
    for rb in backs:
        if rb.round is None:  # a job that died: what it did after its last commit is lost
            redone.extend(kept.pop(s) for s in range(rb.restored + 1, rb.reached + 1)
                          if s in kept)
    finished = [ev.t for ev in history(events).of("job_done", "job_failed")]
    wall = max(finished) if finished else end_time

    def working(spans: Iterable[tuple[float, float]]) -> float:
        return sum(b - a - sum(max(0.0, min(b, st.end) - max(a, st.start)) for st in stalls)
                   for a, b in spans)

    return Goodput(working(kept.values()), working(redone),
                   sum(st.duration for st in stalls), wall)


@dataclass(frozen=True)
class Restarts:
    """How often the job started over, in its three senses."""

    rendezvous: int
    """Rounds formed after the first (the world was re-formed)."""
    rollbacks: int
    """Restore events: a process went back to its last commit."""
    processes: int
    """Process starts beyond each process's first."""


def restarts_of(events: Sequence[TraceEvent], rounds: Sequence[RoundInfo]) -> Restarts:
    """Count re-formations, rollbacks and process restarts."""
    starts: dict[str, int] = {}
    events = history(events)
    for ev in events.of("proc_start"):
        starts[ev.proc] = starts.get(ev.proc, 0) + 1
    return Restarts(
        rendezvous=max(0, len(rounds) - 1),
        rollbacks=len(events.of("restore")),
        processes=sum(n - 1 for n in starts.values()),
    )


def lost_samples(rec: Recovery, rounds: Sequence[RoundInfo], batch_size: int = 1) -> int:
    """Samples redone because of one fault: lost steps x processes of the round the fault
    hit x samples per process per step."""
    hit = [r for r in rounds if r.formed_at <= rec.at]
    procs = max(hit, key=lambda r: r.round).processes if hit else 0
    return rec.lost_steps * procs * batch_size
