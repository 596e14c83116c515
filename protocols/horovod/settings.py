"""Horovod elastic's knobs with upstream's defaults, and the scenario vocabulary of host
discovery and worker exits (plain dataclasses, validated by the scenario loader)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pydantic
from pydantic import Field

from elastic_sim.protocols.ranges import (
    MAX_PROCS_PER_HOST,
    Count,
    Finite,
    Period,
    Port,
    PosCount,
    ProcsPerHost,
    Seconds,
)

KeepIdle = Annotated[float, Field(ge=1, le=32767, allow_inf_nan=False)]
"""TCP_KEEPIDLE: Linux accepts 1..32767 seconds (``MAX_TCP_KEEPIDLE``)."""
KeepInterval = Annotated[float, Field(ge=1, le=32767, allow_inf_nan=False)]
"""TCP_KEEPINTVL: Linux accepts 1..32767 seconds (``MAX_TCP_KEEPINTVL``)."""
KeepCount = Annotated[int, Field(ge=1, le=127)]
"""TCP_KEEPCNT: Linux accepts 1..127 probes (``MAX_TCP_KEEPCNT``)."""

_STRICT = pydantic.with_config(pydantic.ConfigDict(extra="forbid", allow_inf_nan=False))
"""Nested scenario entries reject unknown keys (a typo is an error, not a default) and
non-finite numbers."""

ExitMode = Literal["exception", "kill", "hang", "exit0", "silent"]
"""How a scheduled worker exit happens: ``exception`` raises (exit 1), ``kill`` SIGKILLs
itself, ``hang`` blocks the training script forever while Horovod's background thread goes
on negotiating (peers stall: stall warnings, no timeout), ``exit0`` returns early with
status 0, ``silent`` stops the whole process (SIGSTOP) like a host without power (peers see
only the Gloo timeout)."""


@_STRICT
@dataclass(frozen=True)
class HostsAt:
    """One entry of a discovery schedule: the hosts (``host:slots`` or bare ``host``) that
    discovery returns while its key matches. At most one key; none = the default entry."""

    hosts: list[str]
    epoch: Count | None = None
    """Matches while rank 0 has logged exactly this many epochs (upstream's test script)."""
    until_s: Seconds | None = None
    """Matches while the driver's run time is below this (wall-time schedule)."""
    until_poll: Count | None = None
    """Matches while fewer than this many discovery polls were made (Ray's test discovery)."""

    def __post_init__(self) -> None:
        keys = [k for k in (self.epoch, self.until_s, self.until_poll) if k is not None]
        if len(keys) > 1:
            raise ValueError("give at most one of epoch, until_s, until_poll")


@_STRICT
@dataclass(frozen=True)
class RandomHosts:
    """Ray's random test discovery: every ``every_s`` seconds remove a host or re-add one,
    staying within [min_hosts, max_hosts]; starts with the first ``max_hosts`` hosts."""

    hosts: list[str]
    min_hosts: Count = 1
    max_hosts: Count = 2
    every_s: Period = 1.0


@_STRICT
@dataclass(frozen=True)
class DiscoveryFailure:
    """The discovery script fails (non-zero exit) or hangs on its ``poll``-th call (1-based)."""

    poll: PosCount
    mode: Literal["error", "hang"] = "error"
    hang_s: Seconds | None = None
    """How long a hang lasts (None: forever)."""


@_STRICT
@dataclass(frozen=True)
class Discovery:
    """Where the driver's host list comes from: a fixed list (``-H``), a schedule, or a
    random source; plus failures of the discovery script."""

    hosts: list[str] = field(default_factory=list)
    """Fixed hosts (FixedHosts); used when no schedule and no random source is given."""
    schedule: list[HostsAt] = field(default_factory=list)
    random: RandomHosts | None = None
    failures: list[DiscoveryFailure] = field(default_factory=list)
    script_time: Seconds = 0.0
    """Seconds one run of the discovery script takes (the lock is held meanwhile)."""


@_STRICT
@dataclass(frozen=True)
class ExitAt:
    """Workers started with one of ``ranks`` leave at the top of batch (epoch, batch)."""

    epoch: Count
    batch: Count
    ranks: list[Count]
    mode: ExitMode | None = None
    """None: the knob ``exit_mode``."""


@dataclass(frozen=True)
class HorovodKnobs:
    """horovodrun's settings (upstream defaults) and the test training script's arguments."""

    np: PosCount = 2
    """Processes at start (``-np``); the first round waits for this many slots."""
    min_np: PosCount | None = None
    """Later rounds wait for this many slots (None: np)."""
    max_np: PosCount | None = None
    """World size cap (None: unbounded)."""
    slots_per_host: ProcsPerHost = 1
    """Slots of a host named without ``:slots``."""
    reset_limit: Count | None = None
    """``--reset-limit`` (upstream: unlimited): resets the driver allows before it stops the
    job with RESET_LIMIT_EXCEEDED; every reset counts, graceful scale-ups and scale-downs
    included (registration.py, checked with ``>=`` before the count grows)."""
    cooldown_range: tuple[Seconds, Seconds] | None = None
    """Blacklist cooldown [lower, upper] seconds (None: a blacklist is permanent)."""
    elastic_timeout: Seconds = 600.0
    """``--elastic-timeout`` (seconds; upstream HOROVOD_ELASTIC_TIMEOUT, 600): how long a
    reset waits for ``min_np`` slots before the driver gives up."""
    gloo_timeout: Period = 30.0
    """HOROVOD_GLOO_TIMEOUT_SECONDS (horovod/common/gloo/gloo_context.cc, default 30 s):
    how long a Gloo rendezvous waits for its peers' keys and how long a Gloo operation
    (a collective, the controller's negotiation) waits on a peer that does not take part
    (dead, frozen or cut off). Peers that negotiate but submit different collectives
    wait without it (see ``stall_check_time``)."""
    stall_check_time: PosCount = 60
    """HOROVOD_STALL_CHECK_TIME_SECONDS (horovod/common/stall_inspector.h,
    ``stall_warning_time_seconds``, default 60 s): rank 0's stall inspector looks this often
    for collectives that some ranks submitted and others did not (different names, or not
    yet) and warns about those waited on for longer. Upstream waits on such a stall
    forever unless ``stall_shutdown_time`` is set."""
    stall_shutdown_time: Count = 0
    """HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (stall_inspector.h, default 0 s: never): a
    stall longer than this shuts Horovod down on every rank (their collectives fail, so
    the elastic run loop restores and resets). Ignored when below ``stall_check_time``,
    as upstream does."""
    stall_check_disable: bool = False
    """HOROVOD_STALL_CHECK_DISABLE (horovod/common/utils/env_parser.cc, default unset): no
    stall inspector at all (no warning, no shutdown)."""
    discovery_period: Period = 1.0
    """Sleep after each discovery tick (DISCOVER_HOSTS_FREQUENCY_SECS; tests use 0.01)."""
    new_host_order: Literal["random", "sorted"] = "random"
    """New hosts join the order in a seeded permutation (upstream: set iteration order,
    which varies per driver process) or sorted."""
    min_start_hosts: int = 2
    """Hosts needed to start (2 unless --network-interface; upstream tests patch it to 1)."""
    process_start_latency: Seconds = 0.2
    """The launch hop (ssh to the host, the task service) before a fresh worker process is
    started. The process's own start (interpreter plus ``import torch``) is the runtime's:
    the sim charges ``cluster.process_start`` (1.3 s), real processes pay it themselves."""
    notification_timeout: Period = 127.0
    """How long one notification attempt waits on a silent rank 0 (OS connect timeout)."""
    notification_attempts: PosCount = 3
    """Attempts of one notification to rank 0 (the worker notification client's retries;
    upstream 3)."""
    kill_grace: Seconds = 5.0
    """SIGTERM, then SIGKILL after this."""
    connect_timeout: Period = 127.0
    """A TCP connect (ssh to a worker host, a worker's HTTP request to the driver) to a
    dead or unreachable host fails after this (Linux: 6 SYN retries, about 127 s)."""
    keepalive_time: KeepIdle = 7200.0
    """An ssh session's TCP keepalive: idle seconds before the first probe (Linux)."""
    keepalive_interval: KeepInterval = 75.0
    """An ssh session's TCP keepalive: seconds between unanswered probes (Linux 75)."""
    keepalive_probes: KeepCount = 9
    """Unanswered probes (``keepalive_interval`` apart) after which the session dies."""
    http_attempts: PosCount = 3
    """Attempts of a worker's HTTP request (PerformHTTP), ``http_retry_delay`` apart."""
    http_retry_delay: Seconds = 0.5
    """Seconds between a worker's HTTP request attempts (PerformHTTP's back-off)."""
    driver_host: str | None = None
    """Host of the driver (None: the scenario's store host)."""
    store_port: Port = 29600
    """Port of the driver's rendezvous key-value service (hosts the Gloo rendezvous)."""
    discovery: Discovery = field(default_factory=Discovery)
    """What the host discovery script reports over time (a fixed host list, a schedule of
    lists by epoch as upstream's integration tests write them, or random draws)."""
    exit_schedule: list[ExitAt] = field(default_factory=list)
    """The test training script's scheduled failures: at (epoch, batch), the workers
    started with these ranks leave (upstream's integration-test ``exit_schedule``)."""
    exit_mode: ExitMode = "exception"
    """How a scheduled worker leaves: ``exception`` (RuntimeError, exit 1), ``kill``
    (SIGKILL itself), ``hang``, ``exit0`` or ``silent`` (upstream's test script modes)."""
    epochs: Count | None = None
    """Training epochs (None: workload steps / batches_per_epoch, rounded up)."""
    batches_per_epoch: PosCount = 10
    """Batches of one epoch of the test training script."""
    batches_per_commit: PosCount = 1
    """The script calls ``state.commit()`` every this many batches (upstream's tests: 1)."""
    host_updates_every: Count = 0
    """Also call check_host_updates every this many batches (0: only at commits)."""
    reinit_error: Literal["abort", "reset"] = "abort"
    """What a Gloo error while a worker re-initialises after a reset does (its new world's
    rendezvous timing out or failing, e.g. on a peer that died after it reported READY).
    Upstream (``abort``): ``GlooContext::Initialize`` runs in Horovod's background thread
    outside any handler (horovod/common/gloo/gloo_context.cc), so the error reaches
    ``std::terminate`` and the process aborts with SIGABRT (exit 134); the driver records a
    failure and blacklists its host. ``reset``: the error reaches the elastic run loop as
    a HorovodInternalError and the worker resets again (asks for its new rank)."""
    reset_callback: bool = False
    """The training script registers a reset callback (``State.register_reset_callbacks``,
    e.g. to rescale the learning rate or repartition the data) that reads the state it acts
    on: the model's step and the epoch. Upstream runs reset callbacks in
    ``State.on_reset()`` (horovod/common/elastic.py), after the new world formed and
    before ``state.sync()``, so they read this rank's own state, not the state the sync
    brings. Default off: upstream's test script registers none."""
    epoch_wait: Seconds = 0.0
    """Seconds the test script sleeps at the end of each epoch (upstream's ``epoch_wait``;
    gives discovery time to change the world between epochs)."""
    discovery_wait: Finite = 3.0
    """Rank 0 waits up to this for an expected notification at epoch end (<= 0: never)."""
    wall_clock_base: Seconds = 1.7e9
    """Added to the run's clock for wall-clock seconds (``int(time.time())`` timestamps)."""


@functools.cache
def _knobs_adapter() -> pydantic.TypeAdapter[HorovodKnobs]:
    """Built once: building a TypeAdapter costs far more than validating with it."""
    return pydantic.TypeAdapter(HorovodKnobs)


def load_knobs(raw: Mapping[str, Any]) -> HorovodKnobs:
    """Knobs from plain data (process args), nested entries included."""
    return _knobs_adapter().validate_python(dict(raw))


def check_knobs(raw: Mapping[str, Any], hosts: list[str]) -> None:
    """Cross-checks a type cannot express: hosts named by the knobs exist in the cluster,
    min_np <= max_np, the cooldown range is upstream's valid range. Raises
    ``ValueError('<knob path>: <message>')``."""
    k = load_knobs(raw)
    known = set(hosts)

    def need(path: str, entry: str) -> None:
        host, sep, slots = entry.partition(":")
        if host not in known:
            raise ValueError(f"{path}: host {host!r} is not a cluster host; expected one of: "
                             + ", ".join(hosts))
        if sep and not (slots.isdigit() and int(slots) <= MAX_PROCS_PER_HOST):
            raise ValueError(f"{path}: expected 'host:slots' with slots an integer in "
                             f"0..{MAX_PROCS_PER_HOST} (MAX_PROCS_PER_HOST, the documented "
                             f"limit of processes per host), got {entry!r}")

    if k.driver_host is not None:
        need("driver_host", k.driver_host)
    for i, h in enumerate(k.discovery.hosts):
        need(f"discovery.hosts[{i}]", h)
    for i, at in enumerate(k.discovery.schedule):
        for j, h in enumerate(at.hosts):
            need(f"discovery.schedule[{i}].hosts[{j}]", h)
    rnd = k.discovery.random
    if rnd is not None:
        for i, h in enumerate(rnd.hosts):
            need(f"discovery.random.hosts[{i}]", h)
        if not rnd.min_hosts <= rnd.max_hosts <= len(rnd.hosts):
            raise ValueError(f"discovery.random: expected min_hosts <= max_hosts <= the number "
                             f"of its hosts ({len(rnd.hosts)}), got [{rnd.min_hosts}, "
                             f"{rnd.max_hosts}]")
    min_np = k.np if k.min_np is None else k.min_np
    if k.max_np is not None and min_np > k.max_np:
        raise ValueError(f"min_np: must be <= max_np ({k.max_np}), got {min_np}")
    if k.cooldown_range is not None:
        lower, upper = k.cooldown_range
        if not 1 <= lower <= upper <= 3600:
            raise ValueError(f"cooldown_range: expected 1 <= lower <= upper <= 3600, got "
                             f"[{lower}, {upper}]")
