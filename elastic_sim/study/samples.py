"""One recovery, measured in the simulator with the faithful protocol model: the scenario a
sample runs (a fresh job of the study's protocol and size, one failure of a kind at a
training step, sometimes a second one during its recovery) and what is read back from its
trace (:class:`Measured`: detection, waiting for capacity, rendezvous, restart, or the
job's death; the restarts the agents spent; what the job's start took).

A sample runs at the job's size or at a rung of the sampling ladder
(:mod:`elastic_sim.study.scaling`); the composed level draws from them.
"""

from __future__ import annotations

import time
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from functools import cache
from typing import Any

from elastic_sim.history import History
from elastic_sim.reports.metrics import Metrics
from elastic_sim.study.failures import EffectKind
from elastic_sim.study.load import PROTOCOL_NODES, Job

STORE_HOST = "h0"
"""The host whose agent serves the rendezvous store in every sample (and in the direct
level's runs): its failure is a kind of its own."""
FAULT_STEP = 3
"""The training step at which a sample's first failure fires."""
AFTER_STEPS = 2
"""Steps a sample trains after its recovery before the job ends."""
SPARE_AFTER = 1.0
"""Seconds after the job's last host a sample's hot spare starts (it finds a complete
round and waits as a spare)."""
LIVELOCK_ROUNDS = 30
"""A sample whose job forms this many rounds without training again after its failure is
stuck (a recovery forms one to a few): the job is ended there (its store host crashed by a
trigger on that round) and the sample reads as hung, sparing the simulator the rest of a
livelock (torchelastic's wait-list livelock with a hot spare restarts every round as soon
as it forms, forever)."""


@dataclass(frozen=True)
class Kind:
    """A kind of recovery to sample: the failure's effect, its downtime, the host it hits
    (``store``: the host serving the rendezvous store; ``other``: any other), whether a
    hot spare is in the pool, and an overlapping second failure (its effect, downtime and
    delay after the first, in seconds)."""

    effect: EffectKind
    downtime: float = 0.0
    target: str = "other"
    spare: bool = False
    returns: bool = True
    second: EffectKind | None = None
    second_downtime: float = 0.0
    second_after: float = 0.0

    def label(self) -> str:
        """For progress lines and reports: ``host 600s other``."""
        out = f"{self.effect} {self.downtime:g}s {self.target}" + (" +spare" if self.spare
                                                                    else "")
        if not self.returns:
            out += " gone"
        if self.second is not None:
            out += f" then {self.second} {self.second_downtime:g}s at +{self.second_after:g}s"
        return out


@dataclass(frozen=True)
class Measured:
    """What one sample's trace says about its recovery (seconds, from the failure)."""

    nodes: int
    seed: int
    kind: Kind
    start_s: float | None
    """From the job's start to its first training step (a fresh job's start)."""
    fault_at: float | None
    """When the (first) failure fired; None: it never did."""
    detect: float | None = None
    capacity: float = 0.0
    """Waiting for the failed host (or its replacement) to come back."""
    rendezvous: float | None = None
    restart: float | None = None
    """From the new round to its first step (the workers' start, the state's sync)."""
    died_after: float | None = None
    """From the failure to the job's end, when it never trained again."""
    hung: bool = False
    """The job neither trained again nor ended (stuck, or livelocked)."""
    spent_failed: int = 0
    """Restarts the failed host's agent spent."""
    spent_others: int = 0
    """Most restarts any other agent spent."""
    workers_restarted: bool = False
    cpu_s: float = 0.0
    virtual_s: float = 0.0
    error: str = ""
    """Why nothing could be read (the sample is then not used)."""

    @property
    def recovered(self) -> bool:
        """Whether the job trained again after the failure."""
        return self.restart is not None

    @property
    def total(self) -> float | None:
        """Failure to the first step of the new world, or to the job's end."""
        if self.recovered:
            return (self.detect or 0.0) + self.capacity + (self.rendezvous or 0.0) + \
                (self.restart or 0.0)
        return self.died_after

    def to_json(self) -> dict[str, Any]:
        """Plain data for the cache and the study's JSON."""
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Measured:
        """Inverse of :meth:`to_json`."""
        return Measured(**{**data, "kind": Kind(**data["kind"])})


def sample_scenario(job: Job, nodes: int, kind: Kind, seed: int,
                    fault_at: float | None = None) -> dict[str, Any]:
    """The scenario of one sample: ``nodes`` hosts of ``job``'s protocol (and a hot spare
    if the kind has one), up over the job's start spread; the failure at step
    :data:`FAULT_STEP` (the second one ``kind.second_after`` seconds after
    ``fault_at``, the first's time in the single sample of the same seed)."""
    least, most, per_node = PROTOCOL_NODES[job.protocol]
    assert least is not None and most is not None, "the composed level's protocols"
    knobs = {**job.knobs, most: nodes}
    # a fixed-size job stays one at every size; an elastic one keeps its proportion
    knobs[least] = max(1, round(nodes * int(job.knobs[least]) / job.nodes))
    if per_node is not None:
        knobs[per_node] = job.gpus_per_node
    w = job.workload
    spread = w.start_spread
    hosts: list[dict[str, Any]] = [
        {"name": f"h{i}", "start_at": round(i * spread / nodes, 6)} for i in range(nodes)]
    if kind.spare:
        hosts.append({"name": f"h{nodes}", "start_at": spread + SPARE_AFTER})
    target = STORE_HOST if kind.target == "store" else f"h{nodes // 2}"
    faults = [dict(fault_entry(kind.effect, target, kind.downtime, kind.returns, "first"),
                   at_step=FAULT_STEP, at=0.0),
              {"id": "livelock", "type": "crash", "host": STORE_HOST, "at": 0.0,
               "when": {"event": "rdzv_done", "match": {"round": LIVELOCK_ROUNDS}}}]
    if kind.second is not None:
        assert fault_at is not None, "an overlap sample needs the first failure's time"
        other = f"h{max(1, nodes // 4)}" if nodes > 2 else "h1"
        faults.append(dict(fault_entry(kind.second, other, kind.second_downtime, True,
                                       "second"), at=round(fault_at + kind.second_after, 6)))
    bound = _bound(job, kind, nodes)
    return {
        "name": f"study-sample-{nodes}", "seed": seed, "time_limit": bound,
        "protocol": {"name": job.protocol, "knobs": knobs},
        "cluster": {"hosts": hosts, "store_host": STORE_HOST, "device": job.device},
        "workload": {"steps": FAULT_STEP + AFTER_STEPS, "step_time": w.step_time,
                     "commit_every": FAULT_STEP, "state_bytes": 1024},
        "faults": faults,
    }


def fault_entry(effect: EffectKind, host: str, downtime: float, returns: bool,
                fid: str, worker: str = "w0") -> dict[str, Any]:
    """A failure as a scenario fault entry (its time or trigger left to the caller);
    ``worker``: the node's process a ``process`` failure kills."""
    if effect == "process":
        return {"id": fid, "type": "crash_process", "proc": f"{host}/{worker}"}
    if effect == "hang":
        return {"id": fid, "type": "hang", "host": host, "duration": max(downtime, 0.001)}
    if not returns:
        return {"id": fid, "type": "crash", "host": host}
    return {"id": fid, "type": "crash_restart", "host": host, "downtime": downtime}


@cache
def knob_defaults(protocol: str) -> dict[str, Any]:
    """The protocol's knobs a study leaves out, at their defaults."""
    from elastic_sim.registry import find_protocol

    info = find_protocol(protocol)
    cls = info.knobs if info is not None else None
    if cls is None or not is_dataclass(cls):
        return {}
    return {f.name: f.default for f in fields(cls) if f.default is not MISSING}


def recovery_bound(job: Job, downtime: float) -> float:
    """Seconds past which a recovery from a failure with this downtime is not under way
    any more (the job is stuck): the downtime and every timeout of the knobs (the study's,
    else the protocol's defaults), twice."""
    k = {**knob_defaults(job.protocol), **job.knobs}
    timeouts = sum(float(k.get(n, 0) or 0) for n in (
        "pg_timeout", "join_timeout", "read_timeout", "stop_timeout", "last_call_timeout",
        "group_timeout", "store_timeout", "exit_barrier_timeout"))
    return downtime + 2 * timeouts + 60.0 + job.restart_cost


def _bound(job: Job, kind: Kind, nodes: int) -> float:
    """A time limit past anything the sample can do: the start, the steps, and the
    longest recovery the knobs allow from both its failures."""
    steps = (FAULT_STEP + AFTER_STEPS + 2) * job.workload.step_time
    return round(job.workload.start_spread + steps + nodes * 0.05 + kind.second_after
                 + recovery_bound(job, kind.downtime + kind.second_downtime), 3)


def run_sample(job: Job, nodes: int, kind: Kind, seed: int,
               fault_at: float | None = None) -> Measured:
    """Run one sample in the simulator and read its recovery."""
    from elastic_sim.pipeline import simulate
    from elastic_sim.scenario import parse_scenario

    sc = parse_scenario(sample_scenario(job, nodes, kind, seed, fault_at), "<study sample>")
    c0 = time.process_time()
    hist, metrics, result = simulate(sc, seed)
    cpu = time.process_time() - c0
    m = read_recovery(hist, metrics, kind, nodes, seed, result.hung)
    return _with(m, cpu_s=round(cpu, 3), virtual_s=round(result.end_time, 3))


def _with(m: Measured, **changes: Any) -> Measured:
    from dataclasses import replace

    return replace(m, **changes)


def read_recovery(hist: History, metrics: Metrics, kind: Kind, nodes: int,
                  seed: int, result_hung: bool = False) -> Measured:
    """The recovery from the first failure of a sample's trace (``result_hung``: the run
    reached its time limit with processes alive)."""
    trained = [r for r in metrics.rounds if r.first_step_at is not None]
    start_s = _resumed(hist, trained[0].round, trained[0].first_step_at) if trained else None
    faults = [ev for ev in hist.of("fault") if ev.get("phase") == "start"]
    first = next((ev for ev in faults if ev.get("id") == "first"), None)
    if first is None:
        return Measured(nodes, seed, kind, start_s, None, error="the failure never fired")
    t_f = first.t
    stuck = any(ev.get("id") == "livelock" for ev in faults)
    ended = None if stuck or result_hung else metrics.end_time
    rec = read_window(hist, metrics, t_f, str(first.get("target")).split("/")[0],
                      kind.downtime if kind.effect != "process" and kind.returns
                      and not kind.spare else None, ended=ended)
    return Measured(nodes, seed, kind, start_s, t_f, **rec)


def read_window(hist: History, metrics: Metrics, t_f: float, failed: str,
                back_after: float | None, until: float | None = None,
                ended: float | None = None) -> dict[str, Any]:
    """The recovery from a failure at ``t_f`` of host ``failed`` (``back_after``: seconds
    until it is back, when the job has to wait for it): its phases, or when the job
    died (``ended``: when its last process exited; None: it never did, it hung); the
    restarts spent; whether the workers started again. ``until``: the first round formed
    at or after it is not this failure's (a later failure's)."""
    neutral = hist.neutral
    restarts = [ev for ev in neutral.of("restart") if ev.t >= t_f]
    failed_at = [ev.t for ev in hist.of("job_failed") if ev.t >= t_f]
    seen = [ev.t for ev in restarts[:1]] + failed_at[:1]
    rec = next((r for r in metrics.recoveries if abs(r.at - t_f) < 1e-9), None)
    if rec is not None and rec.detected_at is not None:
        seen.append(rec.detected_at)
    detected = min(seen) if seen else None
    spent: dict[str, int] = {}
    nxt = next((r for r in metrics.rounds if r.first_step_at is not None
                and r.formed_at > t_f and (detected is None or r.formed_at >= detected)),
               None)
    if nxt is not None and until is not None and nxt.formed_at >= until:
        nxt = None
    horizon = nxt.formed_at if nxt is not None else float("inf")
    for ev in restarts:
        if ev.t <= horizon and ev.get("spent"):
            spent[ev.host] = spent.get(ev.host, 0) + 1
    resumed = _resumed(hist, nxt.round, nxt.first_step_at) if nxt is not None else None
    out: dict[str, Any] = {
        "spent_failed": spent.pop(failed, 0),
        "spent_others": max(spent.values(), default=0),
        "workers_restarted": any(t_f <= ev.t <= (resumed or horizon)
                                 for ev in hist.of("workers_started")),
    }
    if nxt is None or nxt.first_step_at is None:
        out.update(detect=None if detected is None else detected - t_f)
        if ended is None:
            out.update(hung=True)
        else:
            out.update(died_after=max(ended, *failed_at) - t_f)
        return out
    seen_s = (detected if detected is not None else nxt.formed_at) - t_f
    # waiting for the failed host counts as capacity; detection is only what lies beyond
    # its return (a dead peer NCCL never reports is noticed when its replacement joins)
    capacity = back_after if (back_after is not None and failed in nxt.members) else 0.0
    capacity = min(capacity, nxt.formed_at - t_f)
    detect = max(0.0, seen_s - capacity)
    rendezvous = max(0.0, nxt.formed_at - t_f - capacity - detect)
    out.update(detect=max(0.0, detect), capacity=capacity, rendezvous=rendezvous,
               restart=max(0.0, (resumed or nxt.first_step_at) - nxt.formed_at))
    return out


def _resumed(hist: History, rnd: int, first_step_at: float | None) -> float | None:
    """When a round's training resumed: its last member's state sync (its first step's
    compute is training, not recovery), else its first step."""
    syncs = [ev.t for ev in hist.of("sync") if ev.get("round") == rnd]
    return max(syncs) if syncs else first_step_at
