"""Control messages between processes: JSON objects, never pickled on the wire."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JSON = Any
"""A JSON-serialisable value: what messages, process arguments and trace fields carry."""


@dataclass(frozen=True)
class Message:
    """A control message: ``body`` is a JSON object; never pickled on the wire."""

    src: str
    body: Mapping[str, JSON]
