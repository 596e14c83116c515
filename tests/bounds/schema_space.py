"""Hypothesis strategies drawn from the scenario schema itself: every numeric field of the
scenario models and of each protocol's knobs, with its own type and range (read from the
pydantic metadata and the knob dataclasses' annotations), as valid and invalid values."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

import annotated_types as at
from hypothesis import strategies as st
from pydantic import BaseModel

from elastic_sim.registry import BUILTIN_PROTOCOLS as PROTOCOLS
from elastic_sim.scenario import ClusterModel, ExpectModel, Scenario, WorkloadModel


@dataclass(frozen=True)
class NumberField:
    """One numeric field: where it is, its type and its range."""

    path: tuple[str, ...]
    kind: type
    """int or float."""
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False
    finite: bool = False
    """NaN and infinities are refused."""
    nullable: bool = False

    @property
    def dotted(self) -> str:
        """The field path as the error message names it."""
        return ".".join(self.path)


def _constraints(meta: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in meta:
        for name in ("ge", "gt", "le", "lt", "allow_inf_nan"):
            value = getattr(m, name, None)
            if value is not None:
                out[name] = value
        if hasattr(m, "metadata"):  # a FieldInfo inside Annotated
            out.update(_constraints(list(m.metadata)))
        if isinstance(m, at.Interval):
            out.update({k: v for k, v in vars(m).items() if v is not None})
    return out


def _numeric(path: tuple[str, ...], ann: Any, meta: list[Any], finite_default: bool
             ) -> NumberField | None:
    """The numeric branch of ``ann`` (through Annotated, Optional and unions)."""
    nullable = False
    found: tuple[type, list[Any]] | None = None
    stack: list[tuple[Any, list[Any]]] = [(ann, list(meta))]
    while stack:
        a, m = stack.pop()
        origin = typing.get_origin(a)
        if origin is typing.Annotated:
            base, *extra = typing.get_args(a)
            stack.append((base, m + extra))
        elif origin in (typing.Union, types.UnionType):
            stack.extend((arg, list(m)) for arg in typing.get_args(a))
        elif a is type(None):
            nullable = True
        elif a in (int, float) and found is None:
            found = (a, m)
    if found is None:
        return None
    kind, m = found
    c = _constraints(m)
    lo = c.get("ge", c.get("gt"))
    hi = c.get("le", c.get("lt"))
    return NumberField(path, kind, lo, "gt" in c, hi, "lt" in c,
                       finite=not c.get("allow_inf_nan", not finite_default), nullable=nullable)


def model_fields(model: type[BaseModel], prefix: tuple[str, ...]) -> list[NumberField]:
    """The numeric fields of a scenario model (its config says whether floats are finite)."""
    finite = model.model_config.get("allow_inf_nan") is False
    out = []
    for name, info in model.model_fields.items():
        f = _numeric((*prefix, name), info.annotation, list(info.metadata), finite)
        if f is not None:
            out.append(f)
    return out


def knob_fields(protocol: str) -> list[NumberField]:
    """The numeric knobs of a protocol (top level), from the knob dataclass's annotations."""
    knobs = PROTOCOLS[protocol].knobs
    hints = typing.get_type_hints(knobs, include_extras=True)
    out = []
    for f in dataclasses.fields(knobs):
        nf = _numeric(("protocol", "knobs", f.name), hints[f.name], [], False)
        if nf is not None:
            out.append(nf)
    return out


def scenario_fields(protocol: str) -> list[NumberField]:
    """Every numeric field a scenario of ``protocol`` has (top level, cluster, workload,
    expect, knobs)."""
    return [*model_fields(Scenario, ()), *model_fields(ClusterModel, ("cluster",)),
            *model_fields(WorkloadModel, ("workload",)), *model_fields(ExpectModel, ("expect",)),
            *knob_fields(protocol)]


def valid(f: NumberField) -> st.SearchStrategy[Any]:
    """Values the field's type and range accept."""
    if f.kind is int:
        lo = None if f.lo is None else math.floor(f.lo) + (1 if f.lo_open else 0)
        hi = None if f.hi is None else math.ceil(f.hi) - (1 if f.hi_open else 0)
        ints = st.integers(min_value=lo, max_value=hi)
        return st.one_of(st.none(), ints) if f.nullable else ints
    floats = st.floats(min_value=f.lo, max_value=f.hi, exclude_min=f.lo_open and f.lo is not None,
                       exclude_max=f.hi_open and f.hi is not None, allow_nan=not f.finite,
                       allow_infinity=not f.finite)
    return st.one_of(st.none(), floats) if f.nullable else floats


def invalid(f: NumberField) -> st.SearchStrategy[Any]:
    """Values the field's type or range refuses."""
    options: list[st.SearchStrategy[Any]] = [st.sampled_from(["x", [1], {"a": 1}])]
    if f.kind is int:
        options.append(st.sampled_from([0.5, 1.25]))
        if f.lo is not None:
            lo = math.floor(f.lo) + (1 if f.lo_open else 0)
            options.append(st.integers(max_value=lo - 1))
        if f.hi is not None:
            hi = math.ceil(f.hi) - (1 if f.hi_open else 0)
            options.append(st.integers(min_value=hi + 1))
        return st.one_of(options)
    if f.finite:
        options.append(st.sampled_from([math.nan, math.inf, -math.inf]))
    if f.lo is not None:
        below = st.floats(max_value=f.lo, exclude_max=not f.lo_open, allow_nan=False,
                          allow_infinity=False)
        options.append(below)
    if f.hi is not None:
        above = st.floats(min_value=f.hi, exclude_min=not f.hi_open, allow_nan=False,
                          allow_infinity=False)
        options.append(above)
    return st.one_of(options)


def refuses(f: NumberField, value: Any) -> bool:
    """Whether ``value`` is outside the field's type and range (the oracle)."""
    if value is None:
        return not f.nullable
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if f.kind is int and not isinstance(value, int):
        return not float(value).is_integer()
    if math.isnan(value) or math.isinf(value):
        return f.finite or (math.isnan(value) and (f.lo is not None or f.hi is not None))
    if f.lo is not None and (value < f.lo or (f.lo_open and value == f.lo)):
        return True
    return f.hi is not None and (value > f.hi or (f.hi_open and value == f.hi))
