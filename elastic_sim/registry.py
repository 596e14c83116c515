"""The protocols a scenario can name: their entry point, knobs and what they need.

A scenario names a built-in protocol (``protocol: {name: torchelastic}``), one that an
installed package registers under the entry-point group ``elastic_sim.protocols``
(``protocol: {name: mine}``), or its own code (``protocol: {entry: "pkg.mod:host_main",
knobs_class: "pkg.mod:Knobs"}``). Nothing here is mutated at run time: a scenario carries
everything needed to find its protocol again, in any process.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from elastic_sim.errors import clip
from elastic_sim.protocols.horovod.settings import HorovodKnobs, check_knobs
from elastic_sim.protocols.ranges import limit_note
from elastic_sim.protocols.static.settings import StaticKnobs
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.strict_numbers import coerced_number, path_text, written_as


@dataclass(frozen=True)
class ProtocolInfo:
    """How to run one protocol model."""

    entry: str
    """``module:function`` of every host's first process."""
    knobs: type[Any] | None
    """Dataclass of its knobs with upstream's (or its own) defaults; ``None``: the knobs
    are passed to the protocol as the scenario gives them (plain data)."""
    summary: str = ""
    check: Callable[[Mapping[str, Any], list[str]], None] | None = None
    """Cross-checks of the validated knobs against the cluster's host names; raises
    ValueError('<knob path>: <message>')."""
    discovery: bool = False
    """Whether it has a discovery source (discovery-source faults can meet it)."""
    vocabulary: str | None = None
    """The module mapping its trace events and knobs onto the checks' protocol-neutral
    vocabulary (:mod:`elastic_sim.vocabulary`); None: its traces are read in every built-in
    protocol's."""


BUILTIN_PROTOCOLS: dict[str, ProtocolInfo] = {
    "static": ProtocolInfo(
        entry="elastic_sim.protocols.static.main:host_main",
        knobs=StaticKnobs,
        summary="store rendezvous per round, sync from the most advanced member, "
        "allreduce training with commits, re-rendezvous on failure",
        vocabulary="elastic_sim.protocols.static.vocabulary",
    ),
    "torchelastic": ProtocolInfo(
        entry="elastic_sim.protocols.torchelastic.launcher:host_main",
        knobs=TorchElasticKnobs,
        summary="torchrun 2.13: c10d dynamic rendezvous, elastic agent restarting its "
        "worker processes, checkpoint every k steps",
        vocabulary="elastic_sim.protocols.torchelastic.vocabulary",
    ),
    "horovod": ProtocolInfo(
        entry="elastic_sim.protocols.horovod.main:host_main",
        knobs=HorovodKnobs,
        summary="horovodrun elastic (Gloo): driver with host discovery, reset barrier and "
        "blacklist, rank 0 notification, State commit/restore/sync run loop",
        check=check_knobs,
        discovery=True,
        vocabulary="elastic_sim.protocols.horovod.vocabulary",
    ),
    "torchft": ProtocolInfo(
        entry="elastic_sim.protocols.torchft.launcher:host_main",
        knobs=TorchFTKnobs,
        summary="torchft 0.2.0: Lighthouse quorum per step, a Manager per replica group, "
        "should_commit vote, heal from a live peer at the max step",
        vocabulary="elastic_sim.protocols.torchft.vocabulary",
    ),
}


ENTRY_POINT_GROUP = "elastic_sim.protocols"
"""Where a package registers its protocols: a name -> a :class:`ProtocolInfo` (or the
``module:function`` of its host entry, whose knobs are then plain data)."""


def _plugin(name: str) -> ProtocolInfo | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name != name:
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # the user's package: say which entry point broke
            raise ValueError(f"entry point {ep.name} = {ep.value!r} of group "
                             f"{ENTRY_POINT_GROUP} cannot be loaded: {exc}") from None
        if isinstance(obj, ProtocolInfo):
            return obj
        if callable(obj):
            return ProtocolInfo(entry=ep.value, knobs=None, summary=obj.__doc__ or "")
        raise ValueError(f"entry point {ep.name} = {ep.value!r} of group {ENTRY_POINT_GROUP}: "
                         f"expected a ProtocolInfo or a host entry function, got "
                         f"{type(obj).__name__}")
    return None


def protocol_names() -> list[str]:
    """The names a scenario's ``protocol.name`` may take here: built-in and registered."""
    from importlib.metadata import entry_points

    return sorted({*BUILTIN_PROTOCOLS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def find_protocol(name: str | None, entry: str | None = None,
                  knobs_class: str | None = None) -> ProtocolInfo | None:
    """The protocol a scenario names: by ``entry`` (with its ``knobs_class``), else by
    ``name`` (built-in, then registered); ``None`` when no such name exists.

    Raises ValueError('<field>: <message>') when an entry or knobs class cannot be imported."""
    if entry is not None:
        knobs = None
        if knobs_class is not None:
            knobs = _import("knobs_class", knobs_class)
            if not (isinstance(knobs, type) and dataclasses.is_dataclass(knobs)):
                raise ValueError(f"knobs_class: {knobs_class!r} is not a dataclass")
        if not callable(_import("entry", entry)):
            raise ValueError(f"entry: {entry!r} is not a function")
        return ProtocolInfo(entry=entry, knobs=knobs, summary=name or entry)
    if name is None:
        raise ValueError("name: expected a protocol name, or an entry 'module:function'")
    return BUILTIN_PROTOCOLS.get(name) or _plugin(name)


def _import(field: str, target: str) -> Any:
    """``module:qualified.name`` -> the object."""
    import importlib

    mod_name, _, attr = target.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"{field}: expected 'module:name', got {target!r}")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # ImportError, AttributeError, or the module's own failure
        raise ValueError(f"{field}: cannot import {target!r}: {type(exc).__name__}: "
                         f"{exc}") from None
    return obj


def qualified_name(obj: Any) -> str:
    """``module:qualified.name`` of a class or function (what ``knobs_class`` takes)."""
    name = f"{obj.__module__}:{obj.__qualname__}"
    if "<locals>" in name:
        raise ValueError(f"{name}: not importable by name (defined inside a function)")
    return name


def suggest(word: str, choices: list[str]) -> str:
    """' (did you mean X?)' when a close match exists."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_FINITE = pydantic.ConfigDict(allow_inf_nan=False)
"""Knobs are finite numbers (nested knob dataclasses say so in their own config)."""


def validate_knobs(info: ProtocolInfo, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check knob names and types; return the knobs with defaults filled in.

    Raises ValueError('<knob>: <message>') on the first problem."""
    if info.knobs is None:  # a protocol without a knobs class takes them as given
        return {str(k): v for k, v in raw.items()}
    fields = _fields(info.knobs)
    for key in raw:
        if key not in fields:
            raise ValueError(
                f"{key}: unknown knob{suggest(key, list(fields))}; expected one of "
                + ", ".join(sorted(fields))
            )
    out: dict[str, Any] = {}
    defaults = None
    for name in fields:
        if name not in raw:
            if defaults is None:
                defaults = info.knobs()
            out[name] = _plain(getattr(defaults, name))
            continue
        try:
            value = _adapter(info.knobs, name).validate_python(raw[name], strict=False)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            got = err["input"] if where else raw[name]
            note = limit_note(err.get("ctx"))
            raise ValueError(f"{name}{where}: {err['msg']}{note} (got {clip(got)})") from None
        out[name] = _plain(value)
        loose = coerced_number(raw[name], out[name], (name,))
        if loose is not None:
            raise ValueError(f"{path_text(loose[0])}: expected a number, got "
                             f"{written_as(loose[1])} ({clip(loose[1])}); write numbers "
                             "unquoted, as digits (1000, 0.5, 1.0e3)")
    return out


_FIELDS: dict[type[Any], tuple[str, ...]] = {}
_ADAPTERS: dict[tuple[type[Any], str], pydantic.TypeAdapter[Any]] = {}


def _fields(knobs: type[Any]) -> tuple[str, ...]:
    """The knob names of a knobs dataclass, in declaration order."""
    names = _FIELDS.get(knobs)
    if names is None:
        names = _FIELDS[knobs] = tuple(f.name for f in dataclasses.fields(knobs))
    return names


def _adapter(knobs: type[Any], name: str) -> pydantic.TypeAdapter[Any]:
    """The validator of one knob, built once per (knobs class, knob): building a
    TypeAdapter costs far more than validating with it, and a world is built per run."""
    adapter = _ADAPTERS.get((knobs, name))
    if adapter is None:
        hint = typing.get_type_hints(knobs, include_extras=True)[name]
        config = None if dataclasses.is_dataclass(hint) else _FINITE
        adapter = _ADAPTERS[(knobs, name)] = pydantic.TypeAdapter(hint, config=config)
    return adapter


def _plain(value: Any) -> Any:
    """Nested knob dataclasses as plain data, so knobs travel as process args (JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
