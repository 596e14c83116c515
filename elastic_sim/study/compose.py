"""The composed level: a Monte Carlo over failure arrivals, each failure's cost drawn from
the recoveries sampled in the simulator (:mod:`elastic_sim.study.sampling`).

One replication follows the job over the horizon. Training alternates with checkpoint
writes; a failure rolls the job back to its last complete checkpoint and costs what a
sample of its kind cost the faithful model: detection, waiting for the failed node (for
this failure's own downtime), rendezvous, restart, or the job's death. A hot spare is
used while one is up (a node back from its downtime becomes one). A second failure
during a recovery costs what an overlap sample says the model does then (a second node
missing from the rendezvous, or the new world failing again), not a second independent
recovery. A job that died is resubmitted by the scheduler (when the study says it is)
once enough nodes are up, and starts afresh as a sampled fresh start does; an agent with
no restarts left fails the job. Everything is charged to the cause of the failure that
made it, in the categories of :data:`elastic_sim.study.outcome.CATEGORIES`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from elastic_sim.scenario_model import PROCESS_START
from elastic_sim.study.failures import Cause, Failure
from elastic_sim.study.load import Job
from elastic_sim.study.outcome import Run, Timeline
from elastic_sim.study.samples import Kind, Measured
from elastic_sim.study.sampling import Book

START = "job start"
"""The cause the job's first start is charged to."""


@dataclass
class Cycle:
    """Where the job stands in its train-then-write cycle: ``pos`` seconds into a cycle
    of ``interval`` seconds of training and ``write`` seconds of checkpoint writing."""

    interval: float
    write: float
    pos: float = 0.0

    @property
    def length(self) -> float:
        """One cycle."""
        return self.interval + self.write

    def trained(self, x: float) -> float:
        """Training seconds in the first ``x`` seconds of cycles from a cycle's start."""
        full, rest = divmod(x, self.length)
        return full * self.interval + min(rest, self.interval)

    def advance(self, dt: float) -> tuple[float, float]:
        """Go on for ``dt`` seconds: (training, writing) seconds in them."""
        a, b = self.pos, self.pos + dt
        train = self.trained(b) - self.trained(a)
        self.pos = b % self.length
        return train, dt - train

    def since_checkpoint(self) -> float:
        """Training since the last complete checkpoint (a write under way is not one)."""
        return min(self.pos, self.interval)

    def until_trained(self, amount: float) -> float:
        """Seconds until ``amount`` more seconds of training are done."""
        if amount <= 0:
            return 0.0
        left_here = max(0.0, self.interval - self.pos)
        if amount <= left_here:
            return amount
        t = self.length - self.pos  # to the next cycle's start
        amount -= left_here
        full, rest = divmod(amount, self.interval)
        if rest == 0 and full > 0:
            full, rest = full - 1, self.interval
        return t + full * self.length + rest


@dataclass
class Pool:
    """The job's hosts: who is up when, who trains, who waits as a spare."""

    size: int
    nodes: int
    up_at: list[float] = field(init=False)
    """When each host is up again (0: up; inf: gone)."""
    active: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.up_at = [0.0] * self.size
        self.active = list(range(self.nodes))

    def up(self, h: int, t: float) -> bool:
        """Whether host ``h`` is up at ``t``."""
        return self.up_at[h] <= t

    def spares(self, t: float) -> list[int]:
        """Hosts up at ``t`` that do not train."""
        if len(self.active) == self.size:
            return []  # every host trains
        act = set(self.active)
        return [h for h in range(self.size) if h not in act and self.up(h, t)]

    def ready_at(self, t: float) -> float:
        """When ``nodes`` hosts are up (inf: never)."""
        later = sorted(u for u in self.up_at if u > t)  # the rest are up at t
        need = self.nodes - (self.size - len(later))
        if need <= 0:
            return t
        return later[need - 1] if need <= len(later) else float("inf")

    def restart_on(self, t: float) -> None:
        """A fresh job: the first ``nodes`` hosts up at ``t`` train."""
        self.active = [h for h, u in enumerate(self.up_at) if u <= t][:self.nodes]


def replicate(job: Job, book: Book, causes: dict[str, Cause], failures: list[Failure],
              horizon: float, rng: random.Random) -> Run:
    """One replication of ``job`` under ``failures``."""
    return _Replication(job, book, causes, horizon, rng).run(failures)


class _Replication:
    def __init__(self, job: Job, book: Book, causes: dict[str, Cause], horizon: float,
                 rng: random.Random) -> None:
        self.job, self.book, self.causes, self.horizon, self.rng = job, book, causes, horizon, rng
        w = job.workload
        self.cycle = Cycle(job.commit_steps * w.step_time, w.checkpoint_write)
        self.work = (w.steps * w.step_time) if w.steps is not None else None
        self.pool = Pool(job.pool, job.nodes)
        self.tl = Timeline()
        self.useful = 0.0
        self.checkpoint = 0.0
        self.lost: dict[str, float] = {}
        self.recoveries: list[tuple[str, float]] = []
        self.failures = self.deaths = 0
        self.budget = int(job.knobs.get("max_restarts", 1 << 30))
        self.spent: dict[int, int] = {}
        self.spent_all = 0
        self.extra = max(0.0, job.restart_cost - PROCESS_START)
        """What a worker's start costs beyond the simulator's process start."""
        # the job's state: training since train_from; or stopped until resume_at
        self.train_from: float | None = None
        self.resume_at = 0.0
        self.down = False
        """Dead and never to be started again (no resubmission, or out of nodes)."""
        self.fate: str = "running"
        self.fate_at: float | None = None
        self.recovering: tuple[float, Kind, str] | None = None
        """(first failure's time, its kind, its cause) of the recovery under way."""

    # -- the loop ---------------------------------------------------------------------

    def run(self, failures: list[Failure]) -> Run:
        start = self._start_cost()
        self.resume_at = self.tl.add(0.0, start, START, "start")
        self.recovering = None
        for f in failures:
            if f.t >= self._end():
                break
            self._train_until(f.t)
            if self.fate == "completed":
                break
            self._fail(f)
        self._train_until(self._end())
        end = self.fate_at if self.fate == "completed" and self.fate_at else self.horizon
        if self.down:
            self.tl.add(self.fate_at or end, end - (self.fate_at or end),
                        self._down_cause, "job down")
        return Run(end, self.useful, self.checkpoint, self.lost, self.tl.intervals,
                   self.recoveries, self.fate, self.fate_at, self.failures, self.deaths)

    _down_cause = ""

    def _end(self) -> float:
        return self.fate_at if self.fate == "completed" and self.fate_at else self.horizon

    def _train_until(self, t: float) -> None:
        """Train from wherever the job stands up to ``t`` (or its completion)."""
        if self.down or self.fate == "completed":
            return
        if self.train_from is None:
            if self.resume_at >= t:
                return
            self.train_from = self.resume_at
            self.recovering = None
        dt = t - self.train_from
        if self.work is not None:
            need = self.cycle.until_trained(self.work - self.useful)
            if need <= dt:
                dt = need
                self.fate, self.fate_at = "completed", self.train_from + need
        train, write = self.cycle.advance(dt)
        self.useful += train
        self.checkpoint += write
        self.train_from += dt

    # -- failures ---------------------------------------------------------------------

    def _fail(self, f: Failure) -> None:
        cause = self.causes[f.cause]
        eff = cause.effect
        running = self.train_from is not None or self.recovering is not None
        host = f.host
        if host is None:
            host = self.rng.choice(self.pool.active) if self.pool.active else 0
        if not self.pool.up(host, f.t):
            return  # down already: nothing more to fail
        in_job = host in self.pool.active
        if eff.takes_host:
            self.pool.up_at[host] = f.t + f.downtime if eff.returns else float("inf")
        self.failures += 1
        if self.down or not in_job:
            return  # a spare, or a job that is not running
        if not running:  # failed while (re)starting: the start waits for a replacement
            return
        if self.recovering is not None:
            self._overlap(f, cause, host)
            return
        assert self.train_from is not None
        self._rollback(f.t, cause.name)
        spare = bool(self.pool.spares(f.t))
        target = "store" if host == min(self.pool.active) else "other"
        m = self.book.single(eff.kind, f.downtime, target, spare, eff.returns, self.rng)
        if spare and eff.takes_host:  # the spare takes the failed host's place
            self.pool.active[self.pool.active.index(host)] = self.pool.spares(f.t)[0]
        self._recover(f, host, cause.name, m, waits=eff.takes_host and not spare)

    def _rollback(self, t: float, cause: str) -> None:
        """Training stops at ``t``: the work since the last checkpoint is lost."""
        lost = self.cycle.since_checkpoint()
        self.useful -= lost
        self.lost[cause] = self.lost.get(cause, 0.0) + lost
        self.cycle.pos = 0.0
        self.train_from = None

    def _recover(self, f: Failure, host: int, cause: str, m: Measured, waits: bool) -> None:
        t = f.t
        if m.hung:
            self._hang(t, cause, m.detect or 0.0)
            return
        if not m.recovered:
            self._die(t, cause, m.detect or 0.0, (m.died_after or 0.0) - (m.detect or 0.0))
            return
        if self._out_of_restarts(m, host, self.causes[f.cause].effect.kind == "host"):
            self._die(t, cause, m.detect or 0.0, 0.0)
            return
        capacity = f.downtime if (waits and m.capacity > 0) else 0.0
        x = self.tl.add(t, m.detect or 0.0, cause, "detection")
        x = self.tl.add(x, capacity, cause, "capacity")
        x = self.tl.add(x, m.rendezvous or 0.0, cause, "rendezvous")
        x = self.tl.add(x, (m.restart or 0.0) + (self.extra if m.workers_restarted else 0.0),
                        cause, "restart")
        self.resume_at = x
        self.recoveries.append((cause, x - t))
        self.recovering = (t, m.kind, cause)

    def _out_of_restarts(self, m: Measured, host: int, replaced: bool) -> bool:
        """Charge the restarts the recovery spends; whether an agent ran out."""
        if replaced:
            self.spent[host] = 0  # a replacement: a fresh agent
        self.spent[host] = self.spent.get(host, 0) + m.spent_failed
        self.spent_all += m.spent_others
        return max(self.spent[host], self.spent_all) > self.budget

    def _overlap(self, f: Failure, cause: Cause, host: int) -> None:
        """A second failure while a recovery is under way."""
        assert self.recovering is not None
        t0, first, first_cause = self.recovering
        whole = self.resume_at - t0
        frac = (f.t - t0) / whole if whole > 0 else 1.0
        eff = cause.effect
        m = self.book.overlap(first, eff.kind, f.downtime, frac, self.rng)
        if m is None or (m.total is None and not m.hung):  # not sampled: a failure on top
            m = self.book.single(eff.kind, f.downtime, "other", False, eff.returns, self.rng)
            after = m.total if m.recovered else None
            died = None if after is not None else (m.died_after or 0.0)
        else:
            after = (m.total or 0.0) - m.kind.second_after if m.recovered else None
            died = None if m.recovered else max(0.0, (m.died_after or 0.0) -
                                                m.kind.second_after)
        if m.hung:
            self.tl.cut(f.t)
            self.recoveries.pop()
            self._hang(f.t, cause.name, 0.0)
            return
        if after is None:
            self.tl.cut(f.t)
            self.recoveries.pop()  # the recovery under way ends in the job's death
            self._die(f.t, cause.name, 0.0, died or 0.0)
            return
        new_end = f.t + max(0.0, after)
        if new_end > self.resume_at:
            self.tl.add(self.resume_at, new_end - self.resume_at, cause.name, "overlap")
            self.recoveries[-1] = (first_cause, new_end - t0)
            self.resume_at = new_end

    def _die(self, t: float, cause: str, detect: float, dying: float) -> None:
        """The job fails: noticed after ``detect``, over after ``dying`` more; then the
        scheduler starts it again, if the study says it does, once enough hosts are up."""
        self.deaths += 1
        self.train_from = None
        x = self.tl.add(t, detect, cause, "detection")
        x = self.tl.add(x, dying, cause, "job failure")
        resubmit = self.job.workload.resubmit
        if resubmit is None:
            self._stay_down(x, cause, "failed")
            return
        x = self.tl.add(x, resubmit, cause, "resubmit")
        ready = self.pool.ready_at(x)
        if ready == float("inf"):
            self._stay_down(x, cause, "out of nodes")
            return
        x = self.tl.add(x, ready - x, cause, "capacity")
        self.pool.restart_on(x)
        self.spent, self.spent_all = {}, 0
        x = self.tl.add(x, self._start_cost(), cause, "restart")
        self.resume_at = x
        self.recoveries.append((cause, x - t))
        self.recovering = (t, Kind("host"), cause)

    def _hang(self, t: float, cause: str, detect: float) -> None:
        """The job is stuck (it neither trains nor ends, as a livelocked job): for good,
        or until the study's stall watchdog kills it."""
        stall = self.job.workload.stall_timeout
        if stall is not None:
            self._die(t, cause, detect, stall)
            return
        self.train_from = None
        self._stay_down(self.tl.add(t, detect, cause, "detection"), cause, "hung")

    def _stay_down(self, t: float, cause: str, fate: str) -> None:
        self.down, self.fate, self.fate_at = True, fate, t
        self._down_cause = cause
        self.recovering = None

    def _start_cost(self) -> float:
        """A fresh job's start: a sampled one, plus the start-up the simulator lacks."""
        starts = self.book.starts()
        return (self.rng.choice(starts) if starts else 0.0) + self.extra


def compose(job: Job, book: Book, causes: tuple[Cause, ...], arrivals: list[list[Failure]],
            horizon: float, seed: int) -> list[Run]:
    """One replication per failure list in ``arrivals`` (the same lists for every
    setting: common random numbers, so settings differ by their setting only)."""
    by_name = {c.name: c for c in causes}
    return [replicate(job, book, by_name, fails, horizon, random.Random(f"{seed}/mc/{i}"))
            for i, fails in enumerate(arrivals)]
