"""The static protocol's trace as the checks read it: it records only the kinds every
protocol records alike (``rdzv_done``, ``sync``, ``step``, ``commit``...), neutral as they
are, so it maps none. Plain data, read by ``elastic_sim.vocabulary``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Fields = Mapping[str, Any]

EVENTS: dict[str, tuple[str, Callable[[str, Fields], dict[str, Any] | None]]] = {}
"""Recorded kind -> (its neutral kind, its neutral fields): none of its own is read."""
