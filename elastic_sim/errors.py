"""Errors of the face: bad input names the file, the field path and what was expected.

An error line quotes at most :data:`QUOTE_LIMIT` characters of any one piece of the input
(a value, a key, a path), so a megabyte string in a scenario gives a line a person can
read, not a megabyte line.
"""

from __future__ import annotations

import re
from typing import Any

QUOTE_LIMIT = 200
"""Characters of one piece of the input an error line quotes."""
MESSAGE_LIMIT = 2000
"""Characters of an error's message beyond which the rest is left out (a backstop for a
message that quotes many pieces, such as a long list)."""

_QUOTED = re.compile(r"""(?<!\w)'(?:[^'\\]|\\.)*'(?!\w)|(?<!\w)"(?:[^"\\]|\\.)*"(?!\w)""",
                     re.DOTALL)
"""A quoted string in a message (an apostrophe inside a word opens none)."""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def clip(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters of it: how an error quotes input."""
    return _cut(repr(value), limit)


def clip_quoted(message: str, limit: int = QUOTE_LIMIT) -> str:
    """``message`` with every quoted string in it cut to ``limit`` characters, and the
    whole to :data:`MESSAGE_LIMIT`: for messages written elsewhere (a protocol's knob
    check) that quote the input whole."""
    out = _QUOTED.sub(lambda m: _cut(m.group(0), limit), message)
    return _cut(out, MESSAGE_LIMIT)


class ScenarioError(Exception):
    """A scenario (or command line) that cannot be run; exit code 2."""

    def __init__(self, file: str, path: str, message: str) -> None:
        self.file = _cut(file, QUOTE_LIMIT)
        self.path = _cut(path, QUOTE_LIMIT)
        self.message = clip_quoted(message)
        where = f"{self.file}: {self.path}: " if path else f"{self.file}: "
        super().__init__(where + self.message)

    def __reduce__(self) -> tuple[type[ScenarioError], tuple[str, str, str]]:
        """Pickled as its three parts (an error raised in an explore or study worker
        process reaches the parent whole)."""
        return (type(self), (self.file, self.path, self.message))
