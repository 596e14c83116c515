"""The scenario file's JSON Schema, generated from the pydantic classes that validate it.

``elastic-sim schema`` prints it; editors read it through the line every shipped scenario
starts with (``# yaml-language-server: $schema=...``). Each built-in protocol's knobs are
described from its knobs dataclass, under ``protocol.name`` = that protocol. The README's
table of fault types and their fields is generated here too (:func:`fault_reference`).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import re
import textwrap
from typing import Any

import pydantic

from elastic_sim.fault_schema import FAULT_MODELS
from elastic_sim.registry import BUILTIN_PROTOCOLS
from elastic_sim.scenario import Scenario

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_FILE = "scenario.schema.json"
"""The schema's file among the shipped scenarios (``scenarios/scenario.schema.json``)."""
TRIGGER_FIELDS = ("id", "at", "when", "at_step", "at_epoch")
"""Fields every single fault has: its id and when it fires."""


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    knob_fields: dict[str, Any] = {
        f"knobs_{name}": (info.knobs, ...) for name, info in BUILTIN_PROTOCOLS.items()
    }
    # One model holding the scenario and every protocol's knobs: one set of $defs.
    bundle = pydantic.create_model("Bundle", scenario=(Scenario, ...), **knob_fields)
    full = bundle.model_json_schema(ref_template="#/$defs/{model}")
    defs: dict[str, Any] = full["$defs"]
    root = defs.pop("Scenario")
    rules = []
    for name, info in BUILTIN_PROTOCOLS.items():
        ref = full["properties"][f"knobs_{name}"]["$ref"]
        knobs = defs[ref.rsplit("/", 1)[1]]
        knobs["additionalProperties"] = False  # unknown knobs are errors
        docs = attribute_docs(info.knobs) if info.knobs is not None else {}
        for knob, prop in knobs.get("properties", {}).items():
            if knob in docs and "description" not in prop:
                prop["description"] = docs[knob]
        rules.append({
            "if": {"properties": {"protocol": {"properties": {"name": {"const": name}},
                                               "required": ["name"]}}},
            "then": {"properties": {"protocol": {"properties": {"knobs": {"$ref": ref}}}}},
        })
    schema = {"$schema": DRAFT, **root, "title": "elastic-sim scenario", "allOf": rules,
              "$defs": dict(sorted(defs.items()))}
    _plain_descriptions(schema)
    return schema


def attribute_docs(cls: type[Any]) -> dict[str, str]:
    """Each field's docstring (the string under its line) of a dataclass and its bases,
    as one line of prose: what a knob means, upstream's default and its unit."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        except (OSError, TypeError):  # no source (a class made at run time)
            continue
        stmts = body.body if isinstance(body, ast.ClassDef) else []
        for field_line, doc in itertools.pairwise(stmts):
            if (isinstance(field_line, ast.AnnAssign) and isinstance(field_line.target, ast.Name)
                    and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)):
                out[field_line.target.id] = prose(doc.value.value)
    return out


def prose(doc: str) -> str:
    """A docstring as a user reads it in an editor: one paragraph, Markdown code marks
    instead of reStructuredText roles (``:mod:`x``` -> `` `x` ``)."""
    text = " ".join(doc.split()).replace("``", "`")
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)


def _plain_descriptions(node: Any) -> None:
    """Every description of a schema in :func:`prose` form."""
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            node["description"] = prose(node["description"])
        for value in node.values():
            _plain_descriptions(value)
    elif isinstance(node, list):
        for value in node:
            _plain_descriptions(value)


def schema_text() -> str:
    """The schema as ``elastic-sim schema`` prints it (and the shipped file holds)."""
    return json.dumps(scenario_schema(), indent=2, sort_keys=False)


def fault_reference() -> str:
    """A Markdown table of every fault type: its fields and what it does."""
    lines = ["| `type` | fields (`*` required; `=` default) | what it does |", "|---|---|---|"]
    for tag, model in FAULT_MODELS.items():
        schema = model.model_json_schema(ref_template="#/$defs/{model}")
        required = set(schema.get("required", ()))
        fields = [_field(name, prop, name in required)
                  for name, prop in schema["properties"].items()
                  if name != "type" and name not in TRIGGER_FIELDS]
        doc = " ".join((model.__doc__ or "").split()).replace("``", "`")
        lines.append(f"| `{tag}` | {', '.join(fields) or '-'} | {doc} |")
    return "\n".join(lines)


def _field(name: str, prop: dict[str, Any], required: bool) -> str:
    text = f"`{name}`" + ("*" if required else "")
    kind = _kind(prop)
    if kind:
        text += f" ({kind})"
    if "default" in prop and prop["default"] is not None:
        text += f" ={prop['default']}"
    return text


def _kind(prop: dict[str, Any]) -> str:
    """A short reading of a property's type and bounds: ``number > 0``, ``list of str``."""
    options = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    parts = []
    for p in options:
        kind = str(p.get("type", "")) if "enum" not in p and "const" not in p else ""
        if "enum" in p:
            kind = " or ".join(f"`{v}`" for v in p["enum"])
        if p.get("type") == "array":
            size = [f"{op} {p[key]}" for key, op in (("minItems", ">="), ("maxItems", "<="))
                    if key in p]
            kind = "list" + (f" ({', '.join(size)})" if size else "") + " of " + (
                _kind(p["items"]) or "values")
        for key, op in (("exclusiveMinimum", ">"), ("minimum", ">="), ("maximum", "<=")):
            if key in p:
                kind += f" {op} {p[key]}"
        parts.append(kind.replace("string", "str").replace("integer", "int"))
    return " or ".join(x for x in parts if x)
