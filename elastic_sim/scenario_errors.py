"""A pydantic validation error of a scenario, said as one :class:`ScenarioError`: the file,
the field's path as the user wrote it (union branches left out) and what was expected (an
unknown key lists the valid ones, an unknown fault type the fault types).
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel

from elastic_sim.errors import ScenarioError, clip
from elastic_sim.fault_schema import FAULT_MODELS, FAULT_TAGS
from elastic_sim.protocols.ranges import limit_note
from elastic_sim.registry import suggest
from elastic_sim.scenario_model import Scenario

_UNION_TAGS = {"str", "int", "float", "bool", "constrained-int", "constrained-float", "HostModel"}
_FAULT_TAGS = set(FAULT_TAGS)


def _is_tag(part: str, prev_int: bool) -> bool:
    """Whether a pydantic loc element names a union branch rather than a field."""
    return part in _UNION_TAGS or "[" in part or (prev_int and part in _FAULT_TAGS)


def _loc_path(loc: tuple[Any, ...]) -> str:
    out = ""
    prev_int = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            prev_int = True
            continue
        if not _is_tag(str(part), prev_int):
            out += ("." if out else "") + str(part)
        prev_int = False
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The schema model that owns the field at ``loc`` (for listing valid keys)."""
    model: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        if part in _FAULT_TAGS:
            model = FAULT_MODELS[part]
            continue
        if _is_tag(str(part), False):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return None
        ann = field.annotation
        model = _first_model(ann)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _first_model(ann: Any) -> Any:
    import typing

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _from_pydantic(file: str, exc: pydantic.ValidationError) -> ScenarioError:
    errors = exc.errors()
    # With unions, the deepest location is the branch the user meant.
    # Among equally deep ones, an unknown key explains a missing one (a typo).
    err = max(errors, key=lambda e: (len(e["loc"]), e["type"] == "extra_forbidden"))
    loc = tuple(err["loc"])
    path = _loc_path(loc)
    more = ""  # one message: the first problem (union branches would inflate a count)
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        model = _model_at(loc)
        valid = sorted(model.model_fields) if model else []
        hint = suggest(key, valid)
        expected = f"; expected one of: {', '.join(valid)}" if valid else ""
        return ScenarioError(file, path, f"unknown field {clip(key)}{hint}{expected}{more}")
    if err["type"] == "union_tag_invalid":
        got = err.get("input", {})
        kind = got.get("type") if isinstance(got, dict) else None
        valid = list(FAULT_TAGS)
        hint = suggest(str(kind), valid)
        return ScenarioError(
            file, path + ".type", f"unknown fault type {clip(kind)}{hint}; expected one of: "
            + ", ".join(valid) + more
        )
    if err["type"] == "union_tag_not_found":
        return ScenarioError(file, path + ".type", f"missing fault type; expected one of: "
                             f"{', '.join(FAULT_TAGS)}{more}")
    got = err.get("input")
    shown = "" if err["type"] == "missing" else f" (got {clip(got)})"
    msg = "required field is missing" if err["type"] == "missing" else err["msg"]
    return ScenarioError(file, path, f"{msg}{limit_note(err.get('ctx'))}{shown}{more}")
