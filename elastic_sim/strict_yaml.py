"""Reading a scenario's YAML strictly: bounded in size and nesting, and a key given twice
in one mapping is an error (plain YAML loaders keep the last one silently). Numbers are
YAML 1.2's: decimal integers, and decimals with an optional exponent (``1.0e3`` and
``1e3``); YAML 1.1's other readings of a plain scalar (``1_000``, ``0x10``, ``017`` as
octal, ``1:30`` as 90) stay strings, which a number field then refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from elastic_sim.errors import ScenarioError
from elastic_sim.fault_schema import read_text_bounded

MAX_SCENARIO_BYTES = 1 << 20
"""Largest scenario file read."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and lists (scenarios need about six)."""
_MERGE = "tag:yaml.org,2002:merge"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_INT_RE = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_RE = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


class _Problem(Exception):
    def __init__(self, mark: yaml.Mark, message: str) -> None:
        super().__init__(message)
        self.where = f"line {mark.line + 1}, column {mark.column + 1}"
        self.message = message


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that bounds nesting and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Problem(self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                               f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node)
            if key in first:
                raise _Problem(key_node.start_mark, f"duplicate key {key!r} (first given at "
                               f"line {first[key]})")
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_decimal(self, node: yaml.ScalarNode) -> int:
        """A YAML 1.2 integer: decimal digits, a leading zero not octal."""
        return int(str(self.construct_scalar(node)), 10)


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_INT, _INT_RE, list("-+0123456789"))
_StrictLoader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+.0123456789"))
_StrictLoader.add_constructor(_INT, _StrictLoader.construct_decimal)


def read_yaml_file(path: str | Path, what: str) -> Any:
    """The document in the file ``path`` names; :class:`ScenarioError` naming it when it
    does not exist, is a directory (``what``: the kind of file expected, e.g. "scenario")
    or is not YAML."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(str(path), "", "no such file")
    if p.is_dir():
        raise ScenarioError(str(path), "", f"is a directory, expected a {what} YAML file")
    return load_yaml(p, str(path))


def load_yaml(path: Path, file: str) -> Any:
    """The document in ``path``; :class:`ScenarioError` naming ``file`` and the line."""
    try:
        text = read_text_bounded(path, MAX_SCENARIO_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ScenarioError(file, "", f"cannot read: {why}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except _Problem as exc:
        raise ScenarioError(file, exc.where, exc.message) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(file, where, f"invalid YAML: {problem}") from None
