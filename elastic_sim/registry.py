"""The protocols a scenario can name: their entry point, knobs and what they need."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from elastic_sim.protocols.horovod.settings import HorovodKnobs, check_knobs
from elastic_sim.protocols.ranges import limit_note
from elastic_sim.protocols.static.settings import StaticKnobs
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs


@dataclass(frozen=True)
class ProtocolInfo:
    """How to run one protocol model."""

    entry: str
    """``module:function`` of every host's first process."""
    knobs: type[Any]
    """Dataclass of its knobs with upstream's (or its own) defaults."""
    summary: str
    check: Callable[[Mapping[str, Any], list[str]], None] | None = None
    """Cross-checks of the validated knobs against the cluster's host names; raises
    ValueError('<knob path>: <message>')."""


BUILTIN_PROTOCOLS: dict[str, ProtocolInfo] = {
    "static": ProtocolInfo(
        entry="elastic_sim.protocols.static.main:host_main",
        knobs=StaticKnobs,
        summary="store rendezvous per round, sync from the most advanced member, "
        "allreduce training with commits, re-rendezvous on failure",
    ),
    "torchelastic": ProtocolInfo(
        entry="elastic_sim.protocols.torchelastic.launcher:host_main",
        knobs=TorchElasticKnobs,
        summary="torchrun 2.13: c10d dynamic rendezvous, elastic agent restarting its "
        "worker processes, checkpoint every k steps",
    ),
    "horovod": ProtocolInfo(
        entry="elastic_sim.protocols.horovod.main:host_main",
        knobs=HorovodKnobs,
        summary="horovodrun elastic (Gloo): driver with host discovery, reset barrier and "
        "blacklist, rank 0 notification, State commit/restore/sync run loop",
        check=check_knobs,
    ),
}


PROTOCOLS = BUILTIN_PROTOCOLS  # replaced by resolution in the plugin step


def suggest(word: str, choices: list[str]) -> str:
    """' (did you mean X?)' when a close match exists."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_FINITE = pydantic.ConfigDict(allow_inf_nan=False)
"""Knobs are finite numbers (nested knob dataclasses say so in their own config)."""


def validate_knobs(info: ProtocolInfo, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check knob names and types; return the knobs with defaults filled in.

    Raises ValueError('<knob>: <message>') on the first problem."""
    fields = {f.name: f for f in dataclasses.fields(info.knobs)}
    hints = typing.get_type_hints(info.knobs, include_extras=True)
    for key in raw:
        if key not in fields:
            raise ValueError(
                f"{key}: unknown knob{suggest(key, list(fields))}; expected one of "
                + ", ".join(sorted(fields))
            )
    out: dict[str, Any] = {}
    for name in fields:
        if name not in raw:
            out[name] = _plain(getattr(info.knobs(), name))
            continue
        try:
            hint = hints[name]
            config = None if dataclasses.is_dataclass(hint) else _FINITE
            value = pydantic.TypeAdapter(hint, config=config).validate_python(
                raw[name], strict=False)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            got = err["input"] if where else raw[name]
            note = limit_note(err.get("ctx"))
            raise ValueError(f"{name}{where}: {err['msg']}{note} (got {got!r})") from None
        out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """Nested knob dataclasses as plain data, so knobs travel as process args (JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
