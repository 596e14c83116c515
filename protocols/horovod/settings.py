"""Horovod elastic's knobs with upstream's defaults, and the scenario vocabulary of host
discovery and worker exits (plain dataclasses, validated by the scenario loader)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

_STRICT = pydantic.with_config(pydantic.ConfigDict(extra="forbid"))
"""Nested scenario entries reject unknown keys (a typo is an error, not a default)."""

ExitMode = Literal["exception", "kill", "hang", "exit0", "silent"]
"""How a scheduled worker exit happens: ``exception`` raises (exit 1), ``kill`` SIGKILLs
itself, ``hang`` blocks forever (peers see the Gloo timeout), ``exit0`` returns early with
status 0, ``silent`` goes quiet like a host without power (peers see only the timeout)."""


@_STRICT
@dataclass(frozen=True)
class HostsAt:
    """One entry of a discovery schedule: the hosts (``host:slots`` or bare ``host``) that
    discovery returns while its key matches. At most one key; none = the default entry."""

    hosts: list[str]
    epoch: int | None = None
    """Matches while rank 0 has logged exactly this many epochs (upstream's test script)."""
    until_s: float | None = None
    """Matches while the driver's run time is below this (wall-time schedule)."""
    until_poll: int | None = None
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
    min_hosts: int = 1
    max_hosts: int = 2
    every_s: float = 1.0


@_STRICT
@dataclass(frozen=True)
class DiscoveryFailure:
    """The discovery script fails (non-zero exit) or hangs on its ``poll``-th call (1-based)."""

    poll: int
    mode: Literal["error", "hang"] = "error"
    hang_s: float | None = None
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
    script_time: float = 0.0
    """Seconds one run of the discovery script takes (the lock is held meanwhile)."""


@_STRICT
@dataclass(frozen=True)
class ExitAt:
    """Workers started with one of ``ranks`` leave at the top of batch (epoch, batch)."""

    epoch: int
    batch: int
    ranks: list[int]
    mode: ExitMode | None = None
    """None: the knob ``exit_mode``."""


@dataclass(frozen=True)
class HorovodKnobs:
    """horovodrun's settings (upstream defaults) and the test training script's arguments."""

    np: int = 2
    """Processes at start (``-np``); the first round waits for this many slots."""
    min_np: int | None = None
    """Later rounds wait for this many slots (None: np)."""
    max_np: int | None = None
    """World size cap (None: unbounded)."""
    slots_per_host: int = 1
    """Slots of a host named without ``:slots``."""
    reset_limit: int | None = None
    cooldown_range: tuple[float, float] | None = None
    """Blacklist cooldown [lower, upper] seconds (None: a blacklist is permanent)."""
    elastic_timeout: float = 600.0
    gloo_timeout: float = 30.0
    discovery_period: float = 1.0
    """Sleep after each discovery tick (DISCOVER_HOSTS_FREQUENCY_SECS; tests use 0.01)."""
    new_host_order: Literal["random", "sorted"] = "random"
    """New hosts join the order in a seeded permutation (upstream: set iteration order,
    which varies per driver process) or sorted."""
    min_start_hosts: int = 2
    """Hosts needed to start (2 unless --network-interface; upstream tests patch it to 1)."""
    process_start_latency: float = 0.2
    """The launch hop (ssh to the host, the task service) before a fresh worker process is
    started. The process's own start (interpreter plus ``import torch``) is the runtime's:
    the sim charges ``cluster.process_start`` (1.3 s), real processes pay it themselves."""
    notification_timeout: float = 127.0
    """How long one notification attempt waits on a silent rank 0 (OS connect timeout)."""
    notification_attempts: int = 3
    kill_grace: float = 5.0
    """SIGTERM, then SIGKILL after this."""
    connect_timeout: float = 127.0
    """A TCP connect (ssh to a worker host, a worker's HTTP request to the driver) to a
    dead or unreachable host fails after this (Linux: 6 SYN retries, about 127 s)."""
    keepalive_time: float = 7200.0
    """An ssh session's TCP keepalive: idle seconds before the first probe (Linux)."""
    keepalive_interval: float = 75.0
    keepalive_probes: int = 9
    """Unanswered probes (``keepalive_interval`` apart) after which the session dies."""
    http_attempts: int = 3
    """Attempts of a worker's HTTP request (PerformHTTP), ``http_retry_delay`` apart."""
    http_retry_delay: float = 0.5
    driver_host: str | None = None
    """Host of the driver (None: the scenario's store host)."""
    store_port: int = 29600
    """Port of the driver's rendezvous key-value service (hosts the Gloo rendezvous)."""
    discovery: Discovery = field(default_factory=Discovery)
    exit_schedule: list[ExitAt] = field(default_factory=list)
    exit_mode: ExitMode = "exception"
    epochs: int | None = None
    """Training epochs (None: workload steps / batches_per_epoch, rounded up)."""
    batches_per_epoch: int = 10
    batches_per_commit: int = 1
    host_updates_every: int = 0
    """Also call check_host_updates every this many batches (0: only at commits)."""
    epoch_wait: float = 0.0
    discovery_wait: float = 3.0
    """Rank 0 waits up to this for an expected notification at epoch end (<= 0: never)."""
    wall_clock_base: float = 1.7e9
    """Added to the run's clock for wall-clock seconds (``int(time.time())`` timestamps)."""


def load_knobs(raw: Mapping[str, Any]) -> HorovodKnobs:
    """Knobs from plain data (process args), nested entries included."""
    return pydantic.TypeAdapter(HorovodKnobs).validate_python(dict(raw))


def check_knobs(raw: Mapping[str, Any], hosts: list[str]) -> None:
    """Cross-checks a type cannot express: hosts named by the knobs exist in the cluster,
    min_np <= max_np, the cooldown range is upstream's valid range. Raises
    ``ValueError('<knob path>: <message>')``."""
    k = load_knobs(raw)
    known = set(hosts)

    def need(path: str, entry: str) -> None:
        host = entry.partition(":")[0]
        if host not in known:
            raise ValueError(f"{path}: host {host!r} is not a cluster host; expected one of: "
                             + ", ".join(hosts))

    if k.driver_host is not None:
        need("driver_host", k.driver_host)
    for i, h in enumerate(k.discovery.hosts):
        need(f"discovery.hosts[{i}]", h)
    for i, at in enumerate(k.discovery.schedule):
        for j, h in enumerate(at.hosts):
            need(f"discovery.schedule[{i}].hosts[{j}]", h)
    if k.discovery.random is not None:
        for i, h in enumerate(k.discovery.random.hosts):
            need(f"discovery.random.hosts[{i}]", h)
    min_np = k.np if k.min_np is None else k.min_np
    if k.max_np is not None and min_np > k.max_np:
        raise ValueError(f"min_np: must be <= max_np ({k.max_np}), got {min_np}")
    if k.cooldown_range is not None:
        lower, upper = k.cooldown_range
        if not 1 <= lower <= upper <= 3600:
            raise ValueError(f"cooldown_range: expected 1 <= lower <= upper <= 3600, got "
                             f"[{lower}, {upper}]")
