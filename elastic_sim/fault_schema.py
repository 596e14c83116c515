"""The faults part of the scenario schema, derived from the fault classes.

Each fault class of :mod:`elastic_sim.faults.model` is the one definition of its type: the schema
model of a ``type: <tag>`` entry is generated from the class's fields and their annotated
domains (plus what every entry may say: ``id``, ``at`` and a trigger), so YAML is validated
against the class directly, and an entry converts to the class and back generically
(:func:`to_fault`, :func:`fault_dict`). Failure-rate models and replayed failure traces are
sources that expand into many faults. Errors name the file and the field path.
"""

from __future__ import annotations

import dataclasses
import errno
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_type_hints

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, create_model

from elastic_sim.errors import ScenarioError
from elastic_sim.faults.model import FAULT_TYPES, Duration, Fault, Placement, Time
from elastic_sim.faults.triggers import (
    EventTrigger,
    FailureModel,
    TraceFileError,
    Triggered,
    parse_failure_trace,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class WhenModel(_Strict):
    """Fire when a trace event happens: its kind, optionally its host, and data fields."""

    event: str = Field(min_length=1)
    host: str | None = None
    match: dict[str, int | float | str | bool] = {}


class FaultEntry(_Strict):
    """What every single-fault entry may say besides its type's own fields."""

    id: str | None = None
    at: Time | None = None
    """Run time it fires at; with a trigger, when watching for the trigger starts."""
    when: WhenModel | None = None
    at_step: Annotated[int, Field(ge=1)] | None = None
    """Fire when the first ``step`` event with this step number happens."""
    at_epoch: Annotated[int, Field(ge=0)] | None = None
    """Fire when the first rendezvous round (epoch) with this number completes."""
    type: str


def scenario_fields(cls: type[Fault]) -> list[dataclasses.Field[Any]]:
    """The fields of a fault class a scenario gives (not id/at, not derived ones)."""
    return [f for f in dataclasses.fields(cls)
            if f.name not in ("id", "at") and f.name not in cls.derived]


def _entry_model(tag: str, cls: type[Fault]) -> type[FaultEntry]:
    hints = get_type_hints(cls, include_extras=True)
    spec: dict[str, Any] = {"type": (Literal[tag], ...)}
    for f in scenario_fields(cls):
        required = f.metadata.get("needed") or (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        spec[f.name] = (hints[f.name], ... if required else f.default)
    doc = (cls.__doc__ or tag).strip()
    return create_model(f"{cls.__name__}Entry", __base__=FaultEntry, __doc__=doc,
                        __module__=__name__, **spec)


SINGLE: dict[str, type[FaultEntry]] = {t: _entry_model(t, c) for t, c in FAULT_TYPES.items()}
"""Scenario fault type -> its schema model (one fault each), generated from its class."""
globals().update({m.__name__: m for m in SINGLE.values()})  # importable by name: picklable


class MtbfModel(_Strict):
    """Host failures from a failure-rate model: exponential (shape 1) or Weibull."""

    type: Literal["mtbf"]
    id: str | None = None
    mtbf: Duration
    hosts: list[str] | None = None
    """Default: every host."""
    until: Duration
    shape: Duration = 1.0
    downtime: Time | None = None
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
    downtime: Time | None = None


SOURCES: dict[str, type[_Strict]] = {"mtbf": MtbfModel, "replay": ReplayModel}
"""Fault sources that expand into many faults."""

FAULT_MODELS: dict[str, type[BaseModel]] = {**SINGLE, **SOURCES}
FAULT_TAGS: tuple[str, ...] = tuple(FAULT_MODELS)


def _tag_of(value: Any) -> str | None:
    got = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return got if isinstance(got, str) else None


if TYPE_CHECKING:
    FaultModel = FaultEntry | MtbfModel | ReplayModel
else:
    FaultModel = Annotated[
        Union[tuple(Annotated[m, Tag(t)] for t, m in FAULT_MODELS.items())],  # noqa: UP007
        Discriminator(_tag_of),
    ]


# -- conversion -------------------------------------------------------------------------


def to_fault(m: FaultEntry, fid: str, hosts: Sequence[str], store_host: str) -> Fault:
    """One schema entry (not a source) as fault data, placed in the cluster, wrapped in its
    trigger if it has one."""
    at = m.at or 0.0
    cls = FAULT_TYPES[m.type]
    given = {f.name: getattr(m, f.name) for f in scenario_fields(cls)}
    fault = cls(id=fid, at=at, **given).resolve(Placement(tuple(hosts), store_host))
    when = trigger_of(m)
    return Triggered(fid, at, fault, when) if when is not None else fault


def trigger_of(m: FaultEntry) -> EventTrigger | None:
    """The event trigger a fault entry names, if any."""
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
    data: dict[str, Any] = {"id": f.id, "type": f.type, "at": f.at}
    for fl in scenario_fields(type(f)):
        data[fl.name] = _plain(getattr(f, fl.name))
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# -- references -------------------------------------------------------------------------

_HOST_FIELDS = ("host", "a", "b")
_HOST_LISTS = ("bridge", "src", "dst")


def check_fault(m: Any, base: str, file: str, need_host: Callable[[str, str], None],
                device: str) -> None:
    """Cross-field checks of one fault entry: a time or a trigger, the hosts it names
    exist, the cluster's ``device`` is the one its type needs
    (:attr:`elastic_sim.faults.model.Fault.device`), and its type's own rules
    (:meth:`elastic_sim.faults.model.Fault.problem`)."""
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
    for key in _HOST_FIELDS:
        value = getattr(m, key, None)
        if isinstance(value, str) and value and not (key in ("a", "b") and value == "*"):
            need_host(f"{base}.{key}", value)
    cls = FAULT_TYPES[m.type]
    if cls.device and device != cls.device:
        raise ScenarioError(file, f"{base}.type", f"a {m.type} fault needs cluster.device: "
                            f"{cls.device}, got {device}")
    given = {f.name: getattr(m, f.name) for f in scenario_fields(cls)}
    fault = cls(id="", at=0.0, **given)
    problem = fault.problem()
    if problem is not None:
        raise ScenarioError(file, f"{base}.{problem[0]}", problem[1])
    if "proc" in given:
        need_host(base + ".proc", fault.hosts()[0])
    for g, group in enumerate(getattr(m, "groups", None) or []):
        for j, h in enumerate(group):
            need_host(f"{base}.groups[{g}][{j}]", h)
    for key in _HOST_LISTS:
        for j, h in enumerate(getattr(m, key, None) or []):
            need_host(f"{base}.{key}[{j}]", h)
