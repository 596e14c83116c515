"""The scenario file's JSON Schema, generated from the pydantic classes that validate it.

``elastic-sim schema`` prints it; editors read it through the line every shipped scenario
starts with (``# yaml-language-server: $schema=...``). Each built-in protocol's knobs are
described from its knobs dataclass, under ``protocol.name`` = that protocol. The README's
table of fault types and their fields is generated here too (:func:`fault_reference`).
"""

from __future__ import annotations

import json
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
    for name in BUILTIN_PROTOCOLS:
        ref = full["properties"][f"knobs_{name}"]["$ref"]
        defs[ref.rsplit("/", 1)[1]]["additionalProperties"] = False  # unknown knobs are errors
        rules.append({
            "if": {"properties": {"protocol": {"properties": {"name": {"const": name}},
                                               "required": ["name"]}}},
            "then": {"properties": {"protocol": {"properties": {"knobs": {"$ref": ref}}}}},
        })
    return {"$schema": DRAFT, **root, "title": "elastic-sim scenario", "allOf": rules,
            "$defs": dict(sorted(defs.items()))}


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
