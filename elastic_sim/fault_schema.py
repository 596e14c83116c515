"""The faults part of the scenario schema: one model per fault type, triggers, failure-rate
models and replayed failure traces; their conversion to :mod:`faults.model` data; and the
checks of the names they refer to (errors name the file and the field path).

Field names match the fault dataclasses, so a fault converts to and from scenario data
generically (:func:`fault_dict`).
"""

from __future__ import annotations

import dataclasses
import errno
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import (
    Bridge,
    ClockJump,
    ClockSkew,
    CollectiveFault,
    CrashHost,
    CrashProcess,
    CrashRestart,
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    Fault,
    HangHost,
    IsolateHost,
    IsolateStore,
    LinkFault,
    OneWayPartition,
    Partition,
    Preempt,
    ScaleDown,
    ScaleUp,
    StoreCrash,
    StoreFreeze,
    Straggler,
)
from elastic_sim.faults.triggers import (
    EventTrigger,
    FailureModel,
    TraceFileError,
    Triggered,
    parse_failure_trace,
)

NonNeg = Annotated[float, Field(ge=0)]
Pos = Annotated[float, Field(gt=0)]
Prob = Annotated[float, Field(ge=0, le=1)]
Hosts = Annotated[list[str], Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class WhenModel(_Strict):
    """Fire when a trace event happens: its kind, optionally its host, and data fields."""

    event: str = Field(min_length=1)
    host: str | None = None
    match: dict[str, int | float | str | bool] = {}


class _FaultBase(_Strict):
    id: str | None = None
    at: NonNeg | None = None
    """Run time it fires at; with a trigger, when watching for the trigger starts."""
    when: WhenModel | None = None
    at_step: Annotated[int, Field(ge=1)] | None = None
    """Fire when the first ``step`` event with this step number happens."""
    at_epoch: Annotated[int, Field(ge=0)] | None = None
    """Fire when the first rendezvous round (epoch) with this number completes."""


class CrashModel(_FaultBase):
    """Kill every process of a host; it stays down."""

    type: Literal["crash"]
    host: str


class CrashProcessModel(_FaultBase):
    """Kill one process (``host/name``)."""

    type: Literal["crash_process"]
    proc: str


class CrashRestartModel(_FaultBase):
    """Crash a host; it comes back with fresh processes after ``downtime``."""

    type: Literal["crash_restart"]
    host: str
    downtime: NonNeg


class HangModel(_FaultBase):
    """Freeze a host for a while."""

    type: Literal["hang"]
    host: str
    duration: Pos


class StragglerModel(_FaultBase):
    """A host computes ``factor`` times slower for a while."""

    type: Literal["straggler"]
    host: str
    factor: Annotated[float, Field(ge=1)]
    duration: Pos


class PreemptModel(_FaultBase):
    """SIGTERM, then SIGKILL after ``grace``; the host is gone."""

    type: Literal["preempt"]
    host: str
    grace: NonNeg = 30.0


class PartitionModel(_FaultBase):
    """Cut the network between groups of hosts for a while."""

    type: Literal["partition"]
    groups: Annotated[list[Annotated[list[str], Field(min_length=1)]], Field(min_length=2)]
    duration: Pos


class IsolateModel(_FaultBase):
    """Cut one host off from all others for a while."""

    type: Literal["isolate"]
    host: str
    duration: Pos


class IsolateStoreModel(_FaultBase):
    """Cut the store host off from all others for a while."""

    type: Literal["isolate_store"]
    duration: Pos


class BridgeModel(_FaultBase):
    """Two sides that cannot talk; ``bridge`` hosts talk to both."""

    type: Literal["bridge"]
    groups: Annotated[list[Hosts], Field(min_length=2, max_length=2)]
    bridge: Hosts
    duration: Pos


class OneWayModel(_FaultBase):
    """Drop packets from ``src`` hosts to ``dst`` hosts for a while."""

    type: Literal["one_way_partition"]
    src: Hosts
    dst: Hosts
    duration: Pos


class LinkModel(_FaultBase):
    """Delay, lose, duplicate or reorder traffic between ``a`` and ``b`` (``*``: any)."""

    type: Literal["link"]
    a: str = "*"
    b: str = "*"
    delay: NonNeg = 0.0
    loss: Prob = 0.0
    duplicate: Prob = 0.0
    reorder: NonNeg = 0.0
    duration: Pos


class ClockSkewModel(_FaultBase):
    """A host's wall clock is ``offset`` seconds off for a while."""

    type: Literal["clock_skew"]
    host: str
    offset: float
    duration: Pos


class ClockJumpModel(_FaultBase):
    """A host's wall clock steps by ``delta`` seconds for good."""

    type: Literal["clock_jump"]
    host: str
    delta: float


class StoreCrashModel(_FaultBase):
    """The store server dies (default: the scenario's store host's)."""

    type: Literal["store_crash"]
    host: str | None = None


class StoreFreezeModel(_FaultBase):
    """The store server stops answering for a while."""

    type: Literal["store_freeze"]
    host: str | None = None
    duration: Pos


class CollectiveFaultModel(_FaultBase):
    """The next collective entered on ``host`` fails or hangs."""

    type: Literal["collective"]
    host: str
    mode: Literal["fail", "hang"] = "fail"


class ScaleUpModel(_FaultBase):
    """A new agent starts on ``host`` (not running yet, or gone)."""

    type: Literal["scale_up"]
    host: str


class ScaleDownModel(_FaultBase):
    """``host`` leaves the job: SIGTERM, SIGKILL after ``grace``."""

    type: Literal["scale_down"]
    host: str
    grace: NonNeg = 0.0


class DiscoveryAddModel(_FaultBase):
    """The protocol's discovery source also reports ``host`` (``slots``; default: the
    source's own default), for ``duration`` seconds (default: for good)."""

    type: Literal["discovery_add"]
    host: str
    slots: Annotated[int, Field(ge=1)] | None = None
    duration: Pos | None = None


class DiscoveryRemoveModel(_FaultBase):
    """The protocol's discovery source no longer reports ``host``, for ``duration`` seconds
    (default: for good)."""

    type: Literal["discovery_remove"]
    host: str
    duration: Pos | None = None


class DiscoveryErrorModel(_FaultBase):
    """The discovery script fails on every call for a while."""

    type: Literal["discovery_error"]
    duration: Pos


class DiscoveryHangModel(_FaultBase):
    """A discovery call made in this window hangs until it ends."""

    type: Literal["discovery_hang"]
    duration: Pos


class MtbfModel(_Strict):
    """Host failures from a failure-rate model: exponential (shape 1) or Weibull."""

    type: Literal["mtbf"]
    id: str | None = None
    mtbf: Pos
    hosts: list[str] | None = None
    """Default: every host."""
    until: Pos
    shape: Pos = 1.0
    downtime: NonNeg | None = None
    """Hosts come back after this (crash and restart); default: they stay down."""
    seed: Annotated[int, Field(ge=0)] = 0


class ReplayModel(_Strict):
    """Host failures replayed from a CSV (header: time,host[,downtime]) or JSON trace."""

    type: Literal["replay"]
    id: str | None = None
    file: str
    """Relative to the scenario file."""
    format: Literal["csv", "json"] | None = None
    """Default: from the file's suffix."""
    downtime: NonNeg | None = None


SINGLE: dict[str, type[_FaultBase]] = {
    "crash": CrashModel, "crash_process": CrashProcessModel, "hang": HangModel,
    "partition": PartitionModel, "crash_restart": CrashRestartModel,
    "straggler": StragglerModel, "preempt": PreemptModel,
    "isolate": IsolateModel, "isolate_store": IsolateStoreModel,
    "bridge": BridgeModel, "one_way_partition": OneWayModel, "link": LinkModel,
    "clock_skew": ClockSkewModel, "clock_jump": ClockJumpModel,
    "store_crash": StoreCrashModel, "store_freeze": StoreFreezeModel,
    "collective": CollectiveFaultModel, "scale_up": ScaleUpModel, "scale_down": ScaleDownModel,
    "discovery_add": DiscoveryAddModel, "discovery_remove": DiscoveryRemoveModel,
    "discovery_error": DiscoveryErrorModel, "discovery_hang": DiscoveryHangModel,
}
"""Scenario fault type -> its schema model (one fault each)."""

SOURCES: dict[str, type[_Strict]] = {"mtbf": MtbfModel, "replay": ReplayModel}
"""Fault sources that expand into many faults."""

FAULT_MODELS: dict[str, type[BaseModel]] = {**SINGLE, **SOURCES}
FAULT_TAGS: tuple[str, ...] = tuple(FAULT_MODELS)

FaultModel = Annotated[
    CrashModel | CrashProcessModel | CrashRestartModel | HangModel | StragglerModel
    | PreemptModel | PartitionModel | IsolateModel | IsolateStoreModel | BridgeModel
    | OneWayModel | LinkModel | ClockSkewModel | ClockJumpModel | StoreCrashModel
    | StoreFreezeModel | CollectiveFaultModel | ScaleUpModel | ScaleDownModel
    | DiscoveryAddModel | DiscoveryRemoveModel | DiscoveryErrorModel | DiscoveryHangModel
    | MtbfModel | ReplayModel,
    Field(discriminator="type"),
]


# -- conversion -------------------------------------------------------------------------


def _groups(gs: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(g) for g in gs)


def _rest(hosts: Sequence[str], side: Sequence[str]) -> tuple[str, ...]:
    return tuple(h for h in hosts if h not in side)


def to_fault(m: Any, fid: str, hosts: Sequence[str], store_host: str) -> Fault:
    """One schema model (not a source) as fault data, wrapped in its trigger if it has one."""
    at = m.at or 0.0
    builders: dict[str, Callable[[], Fault]] = {
        "crash": lambda: CrashHost(fid, at, m.host),
        "crash_process": lambda: CrashProcess(fid, at, m.proc),
        "crash_restart": lambda: CrashRestart(fid, at, m.host, m.downtime),
        "hang": lambda: HangHost(fid, at, m.host, m.duration),
        "straggler": lambda: Straggler(fid, at, m.host, m.factor, m.duration),
        "preempt": lambda: Preempt(fid, at, m.host, m.grace),
        "partition": lambda: Partition(fid, at, _groups(m.groups), m.duration),
        "isolate": lambda: IsolateHost(fid, at, ((m.host,), _rest(hosts, [m.host])),
                                       m.duration, m.host),
        "isolate_store": lambda: IsolateStore(
            fid, at, ((store_host,), _rest(hosts, [store_host])), m.duration, store_host),
        "bridge": lambda: Bridge(fid, at, _groups(m.groups), m.duration, tuple(m.bridge)),
        "one_way_partition": lambda: OneWayPartition(fid, at, tuple(m.src), tuple(m.dst),
                                                     m.duration),
        "link": lambda: LinkFault(fid, at, m.a, m.b, m.delay, m.loss, m.duplicate, m.reorder,
                                  m.duration),
        "clock_skew": lambda: ClockSkew(fid, at, m.host, m.offset, m.duration),
        "clock_jump": lambda: ClockJump(fid, at, m.host, m.delta),
        "store_crash": lambda: StoreCrash(fid, at, m.host or store_host),
        "store_freeze": lambda: StoreFreeze(fid, at, m.host or store_host, m.duration),
        "collective": lambda: CollectiveFault(fid, at, m.host, m.mode),
        "scale_up": lambda: ScaleUp(fid, at, m.host),
        "scale_down": lambda: ScaleDown(fid, at, m.host, m.grace),
        "discovery_add": lambda: DiscoveryAdd(fid, at, m.host, m.slots, m.duration),
        "discovery_remove": lambda: DiscoveryRemove(fid, at, m.host, m.duration),
        "discovery_error": lambda: DiscoveryScriptError(fid, at, m.duration),
        "discovery_hang": lambda: DiscoveryScriptHang(fid, at, m.duration),
    }
    fault = builders[m.type]()
    when = trigger_of(m)
    return Triggered(fid, at, fault, when) if when is not None else fault


def trigger_of(m: Any) -> EventTrigger | None:
    """The event trigger a fault model names, if any."""
    if m.when is not None:
        return EventTrigger(m.when.event, m.when.host, tuple(sorted(m.when.match.items())))
    if m.at_step is not None:
        return EventTrigger("step", None, (("step", m.at_step),))
    if m.at_epoch is not None:
        return EventTrigger("rdzv_done", None, (("round", m.at_epoch),))
    return None


def expand(m: Any, fid: str, hosts: Sequence[str], store_host: str,
           base_dir: Path | None, file: str, path: str) -> list[Fault]:
    """The faults one scenario entry stands for (a source expands into many)."""
    if isinstance(m, MtbfModel):
        return FailureModel(m.mtbf, tuple(m.hosts or hosts), m.until, m.shape, m.downtime,
                            m.seed, prefix=fid).expand()
    if isinstance(m, ReplayModel):
        src = Path(m.file) if base_dir is None else base_dir / m.file
        fmt = m.format or ("json" if src.suffix.lower() == ".json" else "csv")
        try:
            text = read_text_bounded(src, MAX_TRACE_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(file, path + ".file", f"cannot read failure trace {src}: "
                                f"{exc.strerror if isinstance(exc, OSError) else exc}") from None
        try:
            return parse_failure_trace(text, fmt, hosts, m.downtime, prefix=fid)
        except TraceFileError as exc:
            raise ScenarioError(f"{src}", exc.where, exc.message) from None
    return [to_fault(m, fid, hosts, store_host)]


MAX_TRACE_BYTES = 16 << 20
"""Largest failure trace a ``replay`` fault reads."""


def read_text_bounded(path: Path, limit: int) -> str:
    """A regular file's text, at most ``limit`` bytes (``/dev/zero`` or a FIFO never
    reaches the reader); OSError otherwise."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB")
    return data.decode("utf-8")


def fault_dict(f: Fault) -> dict[str, Any]:
    """One fault as scenario data (what :func:`to_fault` reads back)."""
    if isinstance(f, Triggered) and f.fault is not None:
        out = fault_dict(f.fault)
        out["at"] = f.at
        if f.when is not None:
            out["when"] = {"event": f.when.kind, "match": dict(f.when.match)}
            if f.when.host is not None:
                out["when"]["host"] = f.when.host
        return out
    model = SINGLE[f.type]
    out = {"id": f.id, "type": f.type}
    names = {fl.name for fl in dataclasses.fields(f)}
    for key in model.model_fields:
        if key in names and key not in ("id", "type"):
            out[key] = _plain(getattr(f, key))
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# -- references -------------------------------------------------------------------------


def check_fault(m: Any, base: str, file: str, need_host: Callable[[str, str], None]) -> None:
    """Cross-field checks of one fault entry: hosts it names exist, a time or a trigger."""
    if isinstance(m, MtbfModel):
        for j, h in enumerate(m.hosts or []):
            need_host(f"{base}.hosts[{j}]", h)
        return
    if isinstance(m, ReplayModel):
        return
    triggers = [k for k in ("when", "at_step", "at_epoch") if getattr(m, k) is not None]
    if len(triggers) > 1:
        raise ScenarioError(file, f"{base}.{triggers[1]}",
                            f"give one trigger, not {' and '.join(triggers)}")
    if m.at is None and not triggers:
        raise ScenarioError(file, f"{base}.at", "required field is missing (a run time in "
                            "seconds, or a trigger: when, at_step or at_epoch)")
    if m.when is not None and m.when.host is not None:
        need_host(f"{base}.when.host", m.when.host)
    for key in ("host", "a", "b"):
        value = getattr(m, key, None)
        if isinstance(value, str) and not (key in ("a", "b") and value == "*"):
            need_host(f"{base}.{key}", value)
    if isinstance(m, CrashProcessModel):
        host, _, name = m.proc.partition("/")
        if not name:
            raise ScenarioError(file, base + ".proc", f"expected 'host/name', got {m.proc!r}")
        need_host(base + ".proc", host)
    for key in ("groups",):
        for g, group in enumerate(getattr(m, key, None) or []):
            for j, h in enumerate(group):
                need_host(f"{base}.{key}[{g}][{j}]", h)
    for key in ("bridge", "src", "dst"):
        for j, h in enumerate(getattr(m, key, None) or []):
            need_host(f"{base}.{key}[{j}]", h)
    if isinstance(m, OneWayModel) and set(m.src) & set(m.dst):
        both = sorted(set(m.src) & set(m.dst))
        raise ScenarioError(file, base + ".dst", f"hosts {both} are in both src and dst")
