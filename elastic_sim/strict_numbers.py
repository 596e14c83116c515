"""Numbers are numbers: a scenario's number is written as one, never as a string or a
boolean that a lax validator would turn into one.

pydantic's lax mode (which the nested knob dataclasses and the YAML's lists need) takes
``"1e3"``, ``"1_000"``, ``true`` and ``2.0`` where an integer is expected. Rather than
making every field strict, the validated value is compared with what was written: where
a number came out of a string, a boolean, or a float with its fraction dropped, the input
is refused. An integer where a float is expected stays valid (YAML's ``1`` for ``1.0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Where = tuple[str | int, ...]


def coerced_number(raw: Any, got: Any, where: Where = ()) -> tuple[Where, Any] | None:
    """The first place (path, value as written) where validation made the number ``got``
    out of something in ``raw`` that is not one; None if every number was written as one.
    ``got`` is the validated value as plain data (dicts, lists, scalars)."""
    if isinstance(raw, Mapping) and isinstance(got, Mapping):
        for key, value in raw.items():
            if key in got:
                found = coerced_number(value, got[key], (*where, key))
                if found is not None:
                    return found
        return None
    if (isinstance(raw, Sequence) and not isinstance(raw, str)
            and isinstance(got, Sequence) and not isinstance(got, str) and len(raw) == len(got)):
        for i, (r, g) in enumerate(zip(raw, got, strict=True)):
            found = coerced_number(r, g, (*where, i))
            if found is not None:
                return found
        return None
    if isinstance(got, int | float) and not isinstance(got, bool):
        if isinstance(raw, str | bool) or (isinstance(raw, float) and isinstance(got, int)):
            return where, raw
    return None


def written_as(raw: Any) -> str:
    """What a refused number was written as, for the message."""
    if isinstance(raw, bool):
        return f"the boolean {str(raw).lower()}"
    if isinstance(raw, float):
        return f"the fractional number {raw!r}"
    return "a string"


def path_text(where: Where) -> str:
    """``where`` as a field path (``faults[0].at``)."""
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out
