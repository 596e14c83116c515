"""The study file's schema: the pydantic models of a study (protocol and knobs, cluster,
workload, failure process, horizon, the settings to compare, how recoveries are sampled)
and of a published failure-data file. Loading and the cross-field checks are
:mod:`elastic_sim.study.load`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from elastic_sim.protocols.ranges import (
    Count,
    HostCount,
    Period,
    PosCount,
    Positive,
    ProcsPerHost,
    Seconds,
)

Name = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
Seed = Annotated[int, Field(ge=0, le=2**64 - 1)]
MAX_REPLICATIONS = 100_000
"""Most Monte Carlo replications of one setting."""
MAX_SETTINGS = 400
"""Most settings one study compares (a grid's product)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class ProtocolPart(_Strict):
    """Which protocol model runs the job, with which knobs (its scenario knobs; the study
    sets the node counts and workers per node from ``cluster``). A compared setting of
    another protocol starts from that protocol's defaults and its own ``knobs``."""

    name: str = "torchelastic"
    knobs: dict[str, Any] = {}


class ClusterPart(_Strict):
    """The job's size and the pool it runs in."""

    nodes: HostCount
    """Nodes the job trains on (every one of them: a fixed-size job)."""
    gpus_per_node: ProcsPerHost = 8
    """Workers per node (one per GPU)."""
    spares: Count = 0
    """Extra nodes in the pool: hot spares the protocol may take over with, and capacity a
    resubmitted job can start on while failed nodes are down."""
    device: Literal["cpu", "cuda"] = "cuda"
    """``cuda``: NCCL's failure detection (a dead peer is seen at the process-group
    timeout); ``cpu``: Gloo's (within a fraction of a second)."""


class WorkloadPart(_Strict):
    """The training job and the costs the simulator does not model itself (each an
    assumption the study states in ``assumptions``)."""

    step_time: Period
    """Seconds per training step at full size."""
    steps: PosCount | None = None
    """A job of fixed work: it completes after this many steps (None: it trains for the
    whole horizon)."""
    checkpoint_interval: Period
    """Seconds of training between checkpoints (rounded to whole steps)."""
    checkpoint_write: Seconds = 0.0
    """Seconds training pauses to write one checkpoint (its blocking part)."""
    checkpoint_load: Seconds = 0.0
    """Seconds a restarted job takes to read its checkpoint."""
    restart_overhead: Seconds = 0.0
    """Seconds a restarted worker takes before its first step besides loading the
    checkpoint: process start, framework and communicator initialisation."""
    resubmit: Seconds | None = None
    """Seconds the scheduler takes to start a job that failed again (from its last
    checkpoint, on healthy nodes); None: a failed job stays failed."""
    start_spread: Seconds = 10.0
    """A (re)started job's hosts come up evenly over this many seconds."""
    step_overhead: Seconds = 0.0
    """Seconds each step costs on top of ``step_time`` that the protocol model does not
    simulate itself (an assumption the study states): e.g. a per-step fault-tolerance
    layer's own cost measured on the user's job. Compared settings may each give their
    own."""
    stall_timeout: Period | None = None
    """A job stuck without progress (a livelock, a hang no timeout ends) is killed after
    this many seconds and resubmitted, as a watchdog or an operator would; None: it stays
    stuck until the horizon."""


class EffectPart(_Strict):
    """What a cause of failures does to the node it hits."""

    effect: Literal["host", "process", "hang"] = "host"
    """``host``: the node dies; a replacement takes its place after ``downtime``.
    ``process``: one worker process dies; the node lives. ``hang``: the node freezes for
    ``downtime``."""
    downtime: Seconds = 0.0
    """Seconds until the node (or its replacement) is back; a hang's length."""
    returns: bool = True
    """False: the node never comes back (the pool shrinks for good)."""


class CausePart(EffectPart):
    """One cause of failures, its share of them and its effect."""

    name: Name
    share: Positive
    """Relative weight: a count of observed interruptions, or a fraction."""


class FailuresPart(_Strict):
    """How often the job's nodes fail, and why: one rate source (``published``,
    ``mtbf_per_node``, ``mtbf_per_gpu``, ``mttf_at_scale``, ``every`` or ``replay``)."""

    published: str | None = None
    """A published failure-data file (relative to the study file): its observed
    interruptions (or failure interval) and causes."""
    mtbf_per_node: Period | None = None
    """Mean seconds between failures of one node."""
    mtbf_per_gpu: Period | None = None
    """Mean seconds between failures of one GPU (a node fails gpus_per_node times as
    often)."""
    mttf_at_scale: str | None = None
    """A data file of a job's mean time to failure at several GPU counts: the job's MTTF
    at its own GPU count, by a power law through them."""
    every: tuple[Period, Period] | None = None
    """``[low, high]``: the running job fails every low..high seconds (uniform)."""
    replay: str | None = None
    """A failure log (CSV ``time,host,cause[,downtime]``, relative to the study file)."""
    shape: Positive = 1.0
    """Weibull shape of a node's time between failures (1: exponential)."""
    causes: list[CausePart] | None = None
    """The causes and their shares (a published file brings its own)."""
    effects: dict[str, EffectPart] = {}
    """What a published file's causes do: by cause name, by category, or ``default``."""


class SettingPart(_Strict):
    """One setting to compare: what it changes from the study's own."""

    label: str | None = None
    checkpoint_interval: Period | None = None
    spares: Count | None = None
    max_restarts: Count | None = None
    protocol: str | None = None
    step_overhead: Seconds | None = None
    """Seconds each step costs on top of the step time under this setting
    (``workload.step_overhead``)."""
    knobs: dict[str, Any] = {}
    """Protocol knobs this setting changes."""


class GridPart(_Strict):
    """Settings as a grid: every combination of the values listed."""

    checkpoint_interval: Annotated[list[Period], Field(min_length=1)] | None = None
    spares: Annotated[list[Count], Field(min_length=1)] | None = None
    max_restarts: Annotated[list[Count], Field(min_length=1)] | None = None
    protocol: Annotated[list[str], Field(min_length=1)] | None = None


class SamplingPart(_Strict):
    """How the composed level samples recoveries in the simulator."""

    max_nodes: HostCount = 128
    """Largest job size sampled (a larger job is sampled at a ladder of sizes up to this
    one and each phase's growth extrapolated; a job this size or smaller is sampled at
    its own size)."""
    sizes: Annotated[list[HostCount], Field(min_length=2)] | None = None
    """The ladder (default: max_nodes / 4, / 2 and max_nodes)."""
    replicates: PosCount = 2
    """Samples per kind of recovery, each with its own seed."""


class ReferencePart(_Strict):
    """A published outcome the study is held against (shown beside its figure)."""

    goodput_above: Annotated[float, Field(ge=0, le=1)] | None = None
    goodput: Annotated[float, Field(ge=0, le=1)] | None = None
    completion_minutes: Positive | None = None
    completion_minutes_of: dict[str, Positive] = {}
    """Published minutes to complete the job's work, by the label of the setting that
    stands for it (a benchmark that ranks several)."""
    source: str = ""


class StudyFile(_Strict):
    """A whole study file."""

    name: str = ""
    description: str = ""
    assumptions: list[str] = []
    """Every constant the study had to assume, with where it comes from."""
    protocol: ProtocolPart = ProtocolPart()
    cluster: ClusterPart
    workload: WorkloadPart
    failures: FailuresPart
    horizon_days: Positive
    """Days of the run (a job of fixed work: the longest it may take)."""
    replications: Annotated[int, Field(ge=1, le=MAX_REPLICATIONS)] = 100
    """Monte Carlo replications per setting (composed)."""
    direct_replications: Annotated[int, Field(ge=1, le=1000)] = 3
    """Simulated runs of the whole horizon per setting when the study runs directly."""
    seed: Seed = 0
    method: Literal["auto", "direct", "composed"] = "auto"
    """``direct``: simulate the whole horizon; ``composed``: sampled recoveries composed
    over the failure arrivals; ``auto``: direct when it is affordable."""
    compare: GridPart | list[SettingPart] | None = None
    """The settings to compare: a grid, or a list (default: the study's own setting)."""
    sampling: SamplingPart = SamplingPart()
    reference: ReferencePart | None = None


class ObservedPart(_Strict):
    """Interruptions observed over a period on a number of GPUs."""

    interruptions: PosCount
    days: Positive
    gpus: PosCount


class PublishedCausePart(_Strict):
    """One cause of a published breakdown."""

    name: Name
    count: PosCount
    category: str = ""


class MttfPoint(_Strict):
    """A job's mean time to failure at one scale."""

    gpus: PosCount
    hours: Positive


class PublishedFile(_Strict):
    """Published failure data, with its source."""

    name: str
    source: str = Field(min_length=1)
    """Where every figure in the file comes from."""
    observed: ObservedPart | None = None
    causes: list[PublishedCausePart] = []
    mttf: list[MttfPoint] = []
    every: tuple[Period, Period] | None = None
    """The failure interval a benchmark injected ([low, high] seconds)."""
    reported: dict[str, Any] = {}
    """Outcomes the source reports (for the studies that reproduce them)."""
    notes: str = ""
