"""Knob and cluster variation for ``explore``: ranges a search may draw a scenario's knobs
and store host from (``--vary knobs.heartbeat_timeout=1..30``,
``--vary knobs.max_restarts=0..3``, ``--vary cluster.store_host=h0,h2``), so a search
meets a timeout, a restart budget or a store placement other than the scenario's own.

A variation is drawn per case from its own seeded stream and is part of the case: it is
kept while the case shrinks, and written into the reproducer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elastic_sim.errors import ScenarioError
from elastic_sim.scenario import Scenario, parse_scenario, scenario_dict

Variation = tuple[tuple[str, Any], ...]
"""(path, value) pairs: ``knobs.<name>`` or ``cluster.store_host``."""

PATHS = ("knobs.", "cluster.store_host")


@dataclass(frozen=True)
class Vary:
    """One thing a search varies: a path and the values it may take (a list, or a range of
    integers or of milliseconds)."""

    path: str
    choices: tuple[Any, ...] = ()
    lo: float = 0.0
    hi: float = 0.0
    integers: bool = False

    def draw(self, rng: random.Random) -> Any:
        """One value."""
        if self.choices:
            return self.choices[rng.randrange(len(self.choices))]
        if self.integers:
            return rng.randint(int(self.lo), int(self.hi))
        return rng.randint(round(self.lo * 1000), round(self.hi * 1000)) / 1000


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_vary(spec: str) -> Vary:
    """``PATH=LO..HI`` or ``PATH=A,B,...``; ValueError naming what was expected."""
    path, eq, values = spec.partition("=")
    if not eq or not values or not any(path.startswith(p) for p in PATHS) or path == "knobs.":
        raise ValueError(f"expected knobs.NAME=LO..HI, knobs.NAME=A,B,... or "
                         f"cluster.store_host=H,H,..., got {spec!r}")
    if ".." in values:
        lo_s, _, hi_s = values.partition("..")
        try:
            lo, hi = _number(lo_s), _number(hi_s)
        except ValueError:
            raise ValueError(f"{path}: expected numbers LO..HI, got {values!r}") from None
        if not lo <= hi:
            raise ValueError(f"{path}: expected LO <= HI, got {values!r}")
        return Vary(path, lo=lo, hi=hi, integers=isinstance(lo, int) and isinstance(hi, int))
    choices: list[Any] = []
    for v in values.split(","):
        try:
            choices.append(v if path.startswith("cluster.") else _number(v))
        except ValueError:
            choices.append(v)
    return Vary(path, tuple(choices))


def draw_variation(stream: str, varies: Sequence[Vary]) -> Variation:
    """The variation drawn from the random stream named ``stream``."""
    rng = random.Random(stream)
    return tuple((v.path, v.draw(rng)) for v in varies)


def apply_variation(sc: Scenario, variation: Variation, file: str = "<variation>") -> Scenario:
    """``sc`` with the variation's values; ScenarioError if the scenario rejects them."""
    if not variation:
        return sc
    raw = scenario_dict(sc)
    for path, value in variation:
        if path.startswith("knobs."):
            raw["protocol"].setdefault("knobs", {})[path.removeprefix("knobs.")] = value
        else:
            raw["cluster"]["store_host"] = value
    return parse_scenario(raw, file)


def check_varies(sc: Scenario, varies: Sequence[Vary]) -> None:
    """Refuse a variation the scenario cannot take at its ends (unknown knob or host, a
    value out of the knob's range): ScenarioError naming ``--vary``."""
    for v in varies:
        ends = v.choices or (v.lo, v.hi)
        for value in ends:
            value = int(value) if v.integers else value
            try:
                apply_variation(sc, ((v.path, value),))
            except ScenarioError as exc:
                raise ScenarioError("--vary", v.path, f"{value!r}: {exc.message}") from None
