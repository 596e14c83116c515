"""The scenario file's schema: the pydantic models of a scenario (:class:`Scenario` and its
parts: cluster, hosts, links, workload, protocol, epoch log, expectations) with their field
domains and defaults. The scenario schema (``elastic-sim schema``) is generated from them;
loading a file and its cross-field checks are :mod:`elastic_sim.scenario`, which re-exports
these names.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from elastic_sim.fault_schema import FaultModel, expand
from elastic_sim.faults.model import Fault
from elastic_sim.protocols.ranges import MAX_HOSTS, Finite, HostCount, Positive, Seconds, StateBytes
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.registry import ProtocolInfo, find_protocol, validate_knobs
from elastic_sim.world import (
    HOST_NAME_PATTERN,
    PROCESS_EXIT,
    WAKE_LATENCY,
    HostSpec,
    LinkSpec,
    collective_model,
)

NonNeg = Seconds
PROCESS_START = 1.3
"""Interpreter start plus ``import torch`` of a worker process (shared/calibration.md:
about 1.3 s of torchrun's 1.7 s worker-crash recovery on these machines)."""
Pos = Positive
Seed = Annotated[int, Field(ge=0, le=2**64 - 1)]
"""Seeds are 64-bit."""
HostName = Annotated[str, Field(json_schema_extra={"pattern": HOST_NAME_PATTERN})]
"""A host's name (:data:`elastic_sim.world.HOST_NAME_PATTERN`); checked with the scenario's
cross-field checks, which say what a host name may be."""
DEFAULT_TIME_LIMIT = 3600.0
"""Run time after which a scenario that sets no ``time_limit`` is called hung, unless its
faults and knobs ask for longer (:meth:`Scenario.run_time_limit`)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class HostModel(_Strict):
    """A host: its name, when it starts, its clock, and how it differs from the others."""

    name: HostName
    start_at: NonNeg = 0.0
    clock_offset: Finite = 0.0
    clock_drift: Annotated[float, Field(gt=-1, allow_inf_nan=False)] = 0.0
    """Relative rate error; above -1, where the host's clock would stop."""
    start_delay: NonNeg = 0.0
    """Extra seconds every process started on it takes before its entry runs, its first
    one included (a ``slow_start`` fault delays only the processes started after it)."""
    steps: Annotated[int, Field(ge=1)] | None = None
    """Its workers train only up to this step (at most ``workload.steps``), then end with
    success: a host that finishes early."""
    step_factor: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)] = 1.0
    """Its compute per step takes this many times ``workload.step_time`` (a slower
    machine; in synchronous training every step waits for it)."""

    def work(self) -> dict[str, float]:
        """Its differences from the workload, as the protocols read them."""
        out: dict[str, float] = {}
        if self.steps is not None:
            out["steps"] = self.steps
        if self.step_factor != 1.0:
            out["step_factor"] = self.step_factor
        return out


class LinkModel(_Strict):
    """A link whose latency/bandwidth differ from the cluster default."""

    a: str
    b: str
    latency: NonNeg
    bandwidth: Pos


class ClusterModel(_Strict):
    """Hosts (a count, names, or objects), store host and network."""

    hosts: HostCount | Annotated[list[HostName | HostModel],
                                 Field(min_length=1, max_length=MAX_HOSTS)]
    store_host: str | None = None
    topology: Literal["star", "full"] = "star"
    latency: NonNeg = 0.00005
    bandwidth: Pos = 3.0e9
    links: list[LinkModel] = []
    process_start: NonNeg = PROCESS_START
    """Sim only: seconds before a process started at run time (a worker) runs its entry."""
    wake_latency: NonNeg = WAKE_LATENCY
    """Sim only: seconds a sleep lasts beyond its due time (real sleeps wake late)."""
    process_exit: NonNeg = PROCESS_EXIT
    """Sim only: seconds a process takes to exit after its main returns (interpreter
    teardown; what it hosts, a store, answers until then). Real processes pay their own."""
    start_over: NonNeg = 0.0
    """Hosts given as a count start evenly over this many seconds (host i of N at
    i x start_over / N), as a launcher brings a large job's nodes up; 0: all at once.
    Listed hosts start at their own ``start_at``."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where training tensors live: ``cpu`` (Gloo groups) or ``cuda`` (NCCL groups, one
    GPU per worker; the sim then uses its NCCL failure model)."""

    def host_specs(self) -> list[HostSpec]:
        """Host specs in order (a count N gives h0..h{N-1})."""
        if isinstance(self.hosts, int):
            n = self.hosts
            return [HostSpec(f"h{i}", i * self.start_over / n) for i in range(n)]
        out = []
        for h in self.hosts:
            if isinstance(h, str):
                out.append(HostSpec(h))
            else:
                out.append(HostSpec(h.name, h.start_at, h.clock_offset, h.clock_drift,
                                    h.start_delay))
        return out


class WorkloadModel(_Strict):
    """The training job."""

    steps: Annotated[int, Field(ge=1)] = Workload.steps
    step_time: NonNeg = Workload.step_time
    commit_every: Annotated[int, Field(ge=1)] = Workload.commit_every
    state_bytes: StateBytes = Workload.state_bytes
    params: Annotated[int, Field(ge=1, le=4096)] = Workload.params
    batch_size: Annotated[int, Field(ge=1)] = Workload.batch_size
    state_broadcast: Literal["group", "tree", "chain"] | None = None
    """How a state sync moves the root's state (protocols/broadcast.py; None: group)."""


class ProtocolModel(_Strict):
    """Which protocol model runs, with which knobs: a name (built-in, or registered by a
    package under the entry-point group ``elastic_sim.protocols``), or your own entry."""

    name: str | None = None
    """A built-in protocol (static, torchelastic, horovod) or a registered one; with
    ``entry``, only a label."""
    entry: str | None = None
    """``module:function``: your own protocol's host entry (``async def host_main(rt,
    args)``)."""
    knobs_class: str | None = None
    """With ``entry``: ``module:Class``, the dataclass of its knobs (checked like a built-in
    protocol's); without it the knobs are passed as given."""
    knobs: dict[str, Any] = {}

    @property
    def label(self) -> str:
        """The protocol's name, else its entry."""
        return self.name or self.entry or "?"


class EpochLogModel(_Strict):
    """The fields of one expected epoch log line that must match (any subset)."""

    epoch: int | None = None
    batch: int | None = None
    commits: int | None = None
    hostname: str | None = None
    start_rank: int | None = None
    rank: int | None = None
    size: int | None = None
    rendezvous: int | None = None


class ExpectModel(_Strict):
    """What the user expects; any unmet expectation makes the run exit 1."""

    outcome: Literal["completed", "failed"] | None = None
    final_world_size: Annotated[int, Field(ge=0)] | None = None
    final_world_size_between: tuple[Annotated[int, Field(ge=0)],
                                    Annotated[int, Field(ge=0)]] | None = None
    """``[low, high]``: the final world size lies within these bounds (both included), for
    an outcome that differs between seeds within a known range."""
    world_sizes: list[Annotated[int, Field(ge=1)]] | None = None
    """The world size of every round, in order."""
    max_recovery_s: NonNeg | None = None
    max_lost_steps: Annotated[int, Field(ge=0)] | None = None
    epoch_logs: list[EpochLogModel] | None = None
    """The training script's per-epoch log lines (``epoch_log`` events), in order: exactly
    as many as listed, each matching the fields it names (size, start_rank, rendezvous...)."""
    error_contains: str | None = None
    """Some ``job_failed`` error contains this text (the error the job ends with)."""
    max_end_s: Pos | None = None
    """Every process has exited within this many seconds of run time (a hang fails it)."""
    violated_checks: list[str] | None = None
    """Safety checks the modelled system is known to break here (upstream's own bugs): the
    run passes only if exactly these checks report violations."""
    may_violate: list[str] | None = None
    """Checks upstream breaks here only when it loses a race that depends on timing (e.g.
    the store host's agent exiting before the others leave the exit barrier): the run
    passes whether they report violations or not; any other check must still hold."""

    def known_violations(self) -> tuple[str, ...]:
        """Checks whose violations this run may show without failing: ``violated_checks``
        and ``may_violate``."""
        return (*(self.violated_checks or ()), *(self.may_violate or ()))


class DemoModel(_Strict):
    """A variant broken on purpose, shipped to show a check catching it."""

    breaks: Annotated[list[str], Field(min_length=1)]
    """The checks it exists to show failing. Its runs exit 1 while they fail (the
    demonstration works); ``pytest --elastic-sim`` counts exactly that as an expected
    failure, and fails the item if they hold or anything else fails."""


class Scenario(_Strict):
    """A whole scenario file."""

    name: str = ""
    description: str = ""
    seed: Seed = 0
    seed_pinned: str | None = None
    """Why the expectations are claimed for ``seed`` only (e.g. a reproducer of one timing
    window). Without it, they hold for every seed (a test sweeps 100 of them)."""
    tie_seed: Seed | None = None
    """Sim only: order events due at the same time from different sources by this seed
    (:mod:`elastic_sim.sim.kernel`) instead of by scheduling order (the default)."""
    time_limit: Pos | None = None
    """Run time (virtual in the sim) after which a run that has not ended is called hung.
    Default: 3,600 s, or, where the protocol's knobs allow a fault a longer recovery,
    twice the checks' progress bound after the last fault starts or heals
    (:meth:`run_time_limit`)."""
    fidelity: Literal["fast", "fine"] = "fast"
    """Sim only: ``fast`` runs fault-free lockstep training stretches as one event each
    (same times, results and checks); ``fine`` simulates every step of every worker."""
    protocol: ProtocolModel
    cluster: ClusterModel
    workload: WorkloadModel = WorkloadModel()
    faults: list[FaultModel] = []
    expect: ExpectModel = ExpectModel()
    demo: DemoModel | None = None
    """Set on a variant broken on purpose: the checks it shows failing."""

    def fault_objects(self) -> list[Fault]:
        """The faults as runtime data, each with an id (``f<i>-<type>`` unless named);
        failure-rate models and replayed traces expanded, in schedule order."""
        hosts = [h.name for h in self.cluster.host_specs()]
        out: list[Fault] = []
        for i, f in enumerate(self.faults):
            fid = f.id or f"f{i}-{f.type}"
            out.extend(expand(f, fid, hosts, self.store_host, None, "<scenario>",
                              f"faults[{i}]"))
        return out

    def run_time_limit(self) -> float:
        """The time limit its runs get: ``time_limit``, or by default
        :data:`DEFAULT_TIME_LIMIT`, or longer where the protocol's knobs allow a fault a
        longer recovery: the last fault's start or heal plus twice the bound within which
        the checks expect progress after it (room to judge it, and for a recovery that
        itself waits out a timeout: with torchrun's defaults, two process-group timeouts
        of 30 min in a row)."""
        if self.time_limit is not None:
            return self.time_limit
        from elastic_sim.checks.facts import limits_of

        limits = limits_of(self.knobs(), self.protocol.name)
        times = [t for f in self.fault_objects() for t in (f.at, f.heals_at) if t is not None]
        if limits is None or not times:
            return DEFAULT_TIME_LIMIT
        return max(DEFAULT_TIME_LIMIT, max(times) + 2 * limits.progress_s)

    def protocol_info(self) -> ProtocolInfo:
        """How to run the scenario's protocol (already checked to exist)."""
        p = self.protocol
        info = find_protocol(p.name, p.entry, p.knobs_class)
        assert info is not None, "checked when the scenario was parsed"
        return info

    def knobs(self) -> dict[str, Any]:
        """The protocol's knobs with defaults filled in (already validated), a
        ``pg_timeout`` left to the backend (None) settled to the default of the groups
        ``cluster.device`` gets (Gloo's 30 min, NCCL's 10: :mod:`elastic_sim.world`), so
        that the world, ``run_start`` and the checks' bounds all see the one value."""
        knobs = validate_knobs(self.protocol_info(), self.protocol.knobs)
        if "pg_timeout" in knobs and knobs["pg_timeout"] is None:
            knobs["pg_timeout"] = collective_model(self.cluster.device).default_timeout
        return knobs

    def links(self) -> tuple[LinkSpec, ...]:
        """Per-link overrides."""
        return tuple(LinkSpec(x.a, x.b, x.latency, x.bandwidth) for x in self.cluster.links)

    @property
    def store_host(self) -> str:
        """The host whose first process serves the store (default: the first host)."""
        return self.cluster.store_host or self.cluster.host_specs()[0].name
