"""Metrics from a trace: rounds and their membership, and for every fault how long the
job took to detect it, re-form, sync and train again, and how much progress it lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from elastic_sim.trace import TraceEvent

Outcome = Literal["completed", "failed", "hung"]


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
    new_round: int | None = None

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

    @property
    def world_sizes(self) -> list[int]:
        """World size of every round, in order."""
        return [r.world_size for r in self.rounds]

    @property
    def lost_steps(self) -> int:
        """Steps redone because of all faults."""
        return sum(r.lost_steps for r in self.recoveries)

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
            "lost_samples": sum(lost_samples(r, self.rounds, self.batch_size)
                                for r in self.recoveries),
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
                    "phases": {k: _r(v) for k, v in r.phases().items()},
                }
                for r in self.recoveries
            ],
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def rounds_of(events: Sequence[TraceEvent]) -> list[RoundInfo]:
    """Formed rounds in order of their number."""
    by_round: dict[int, RoundInfo] = {}
    for ev in events:
        if ev.kind == "rdzv_done":
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
    return [by_round[k] for k in sorted(by_round)]


DETECTION_KINDS = frozenset({"coll_fail", "restore", "job_failed", "rdzv_failed"})
"""Events by which a member shows it noticed a failure."""


def recoveries_of(events: Sequence[TraceEvent], rounds: list[RoundInfo]) -> list[Recovery]:
    """One :class:`Recovery` per fault that started.

    The recovery round is the first round formed after the failure was detected (not
    merely after the fault: a fault during a rendezvous is noticed only later)."""
    out = []
    for i, ev in enumerate(events):
        if ev.kind != "fault" or ev.get("phase") != "start":
            continue
        rec = Recovery(str(ev.get("id")), str(ev.get("type")), str(ev.get("target")), ev.t)
        detected = next((e for e in events[i:] if e.kind in DETECTION_KINDS), None)
        if detected is None:
            out.append(rec)  # nobody noticed: no disruption
            continue
        rec.detected_at = detected.t
        nxt = next((r for r in rounds if r.formed_at >= detected.t), None)
        limit = nxt.first_step_at if nxt and nxt.first_step_at is not None else float("inf")
        last_step: dict[str, int] = {}
        for e in events:
            if e.t > limit:
                break
            if e.kind == "step":
                last_step[e.host] = int(e.get("step"))
            elif e.kind == "restore" and e.t >= ev.t:
                reached = last_step.get(e.host, int(e.get("step")))
                rec.lost_steps = max(rec.lost_steps, reached - int(e.get("step")))
        if nxt is not None:
            rec.new_round = nxt.round
            rec.rendezvous_at = nxt.formed_at
            syncs = [e.t for e in events if e.kind == "sync" and e.get("round") == nxt.round]
            rec.synced_at = max(syncs) if syncs else None
            rec.first_step_at = nxt.first_step_at
        out.append(rec)
    return out


def compute(
    events: Sequence[TraceEvent], total_steps: int, exit_codes: dict[str, int], hung: bool,
    end_time: float, batch_size: int = 1,
) -> Metrics:
    """All metrics of one run."""
    rounds = rounds_of(events)
    done = [e for e in events if e.kind == "job_done"]
    steps_done = max((int(e.get("step", 0)) for e in events if e.kind == "step"), default=0)
    completed = any(int(e.get("step", 0)) >= total_steps for e in done)
    outcome: Outcome = "hung" if hung else ("completed" if completed else "failed")
    last_round = next((r for r in reversed(rounds) if r.steps > 0), rounds[-1] if rounds else None)
    errors = [f"{e.host}: {e.get('error')}" for e in events if e.kind == "job_failed"]
    return Metrics(
        outcome=outcome,
        rounds=rounds,
        recoveries=recoveries_of(events, rounds),
        steps_done=steps_done,
        final_world_size=last_round.world_size if last_round else 0,
        end_time=end_time,
        failed_procs={p: c for p, c in sorted(exit_codes.items()) if c != 0},
        errors=errors,
        batch_size=batch_size,
    )


# -- derived views for reports: world over time, round durations, goodput, restarts ---------


def world_size_series(rounds: Sequence[RoundInfo]) -> list[tuple[float, int]]:
    """(time the round was formed, its world size), one point per round, in time order."""
    return sorted((r.formed_at, r.world_size) for r in rounds)


def round_ends(
    events: Sequence[TraceEvent], rounds: Sequence[RoundInfo], end_time: float
) -> dict[int, float]:
    """When each round ended: the first member leaving it for a later round, else the job's
    end (its last job_done, or the end of the run)."""
    first_join: dict[int, float] = {}
    for ev in events:
        if ev.kind == "rdzv_join":
            rnd = int(ev.get("round", -1))
            first_join.setdefault(rnd, ev.t)
    finished = [ev.t for ev in events if ev.kind in ("job_done", "job_failed")]
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
    """Step time of the steps that count towards the final model, each capped at the
    median step time (time beyond it was spent waiting, not training)."""
    wasted_s: float
    """Step time of steps that were rolled back and redone."""
    stalled_s: float
    """Time kept steps spent beyond the median step time (waiting for a slow or hung peer)."""
    wall_s: float
    """Run time until the job finished (its last job_done or job_failed, else the run end)."""

    @property
    def ratio(self) -> float:
        """Goodput: useful step time over wall time (0..1)."""
        return self.useful_s / self.wall_s if self.wall_s > 0 else 0.0


def goodput(events: Sequence[TraceEvent], rounds: Sequence[RoundInfo], end_time: float) -> Goodput:
    """Goodput seen by each round's leading member: a step lasts from the member's previous
    step (or its sync) to its step event; a step redone later counts only once, as redone;
    a step longer than the median counts as the median plus stalled time."""
    syncs: dict[tuple[int, str], float] = {}
    steps: dict[tuple[int, str], list[tuple[float, int]]] = {}
    for ev in events:
        if ev.kind == "sync":
            syncs.setdefault((int(ev.get("round", -1)), ev.host), ev.t)
        elif ev.kind == "step":
            key = (int(ev.get("round", -1)), ev.host)
            steps.setdefault(key, []).append((ev.t, int(ev.get("step", 0))))
    kept: dict[int, float] = {}
    wasted = 0.0
    for r in sorted(rounds, key=lambda r: r.round):
        hosts = [h for (rnd, h) in steps if rnd == r.round]
        if not hosts:
            continue
        lead = min(hosts, key=lambda h: (-len(steps[(r.round, h)]), r.ranks.get(h, 1 << 30)))
        prev = syncs.get((r.round, lead), r.formed_at)
        for t, step in steps[(r.round, lead)]:
            wasted += kept.get(step, 0.0)
            kept[step] = max(0.0, t - prev)
            prev = t
    finished = [ev.t for ev in events if ev.kind in ("job_done", "job_failed")]
    wall = max(finished) if finished else end_time
    durations = sorted(kept.values())
    typical = durations[len(durations) // 2] if durations else 0.0
    useful = sum(min(d, typical) for d in durations)
    return Goodput(useful, wasted, sum(durations) - useful, wall)


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
    for ev in events:
        if ev.kind == "proc_start":
            starts[ev.proc] = starts.get(ev.proc, 0) + 1
    return Restarts(
        rendezvous=max(0, len(rounds) - 1),
        rollbacks=sum(1 for ev in events if ev.kind == "restore"),
        processes=sum(n - 1 for n in starts.values()),
    )


def lost_samples(rec: Recovery, rounds: Sequence[RoundInfo], batch_size: int = 1) -> int:
    """Samples redone because of one fault: lost steps x world size of the round the fault
    hit x samples per rank per step."""
    hit = [r for r in rounds if r.formed_at <= rec.at]
    world = max(hit, key=lambda r: r.round).world_size if hit else 0
    return rec.lost_steps * world * batch_size
