"""One draw by weight, shared by the search (its corpus) and the study (its failure causes)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def pick_weighted(rng: random.Random, items: Sequence[T], weight: Callable[[T], float]) -> T:
    """One of ``items`` (not empty), each with odds by its ``weight``; one ``rng.random()``
    call, so a seeded draw is the same wherever it is made."""
    x = rng.random() * sum(weight(i) for i in items)
    for item in items:
        x -= weight(item)
        if x < 0:
            return item
    return items[-1]
