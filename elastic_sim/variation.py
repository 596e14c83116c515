"""Knob and cluster variation for ``explore``: ranges a search may draw a scenario's knobs,
store host and cluster shape from (``--vary knobs.heartbeat_timeout=1..30``,
``--vary knobs.max_restarts=0..3``, ``--vary cluster.store_host=h0,h2``,
``--vary cluster.hosts=3..6``, ``--vary cluster.spares=0..2``), so a search meets a
timeout, a restart budget, a store placement or a cluster size other than the scenario's
own.

``cluster.hosts=N`` keeps the scenario's first ``N`` hosts (with their own settings) and
adds plain hosts ``h<i>`` (the smallest unused numbers) beyond them; ``cluster.spares=K``
is resolved up front to ``cluster.hosts`` = the scenario's ``max_nodes`` (or
``max_hosts``) knob plus ``K``: agents beyond the maximum, the hot spares. Min/max are
knobs (``--vary knobs.min_nodes=1..3``). A case's fault schedule is drawn over the hosts
of its own shape.

A variation is drawn per case from its own seeded stream and is part of the case: it is
kept while the case shrinks, and written into the reproducer (so is its shape).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elastic_sim.errors import ScenarioError
from elastic_sim.faults.schedule import FaultSpace
from elastic_sim.scenario import Scenario, parse_scenario, scenario_dict

Variation = tuple[tuple[str, Any], ...]
"""(path, value) pairs: ``knobs.<name>``, ``cluster.store_host``, ``cluster.hosts``,
``cluster.start_at.<host>`` (a host that starts late) or ``time_limit`` (a case whose
faults last long is given the time to recover from them)."""

PATHS = ("knobs.", "cluster.store_host", "cluster.hosts", "cluster.spares", "cluster.start_at.",
         "time_limit")
LATE = "cluster.start_at."
"""``cluster.start_at.<host>``: when that host's first process starts (a late joiner)."""
SHAPES = ("cluster.hosts", "cluster.spares")
"""Paths that set the number of hosts (integers only)."""
MAX_KNOBS = ("max_nodes", "max_hosts")
"""The knob ``cluster.spares`` counts beyond (the first one the protocol has)."""


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
    if not eq or not values or not any(path.startswith(p) for p in PATHS) \
            or path in ("knobs.", LATE, "time_limit") \
            or (path.startswith("cluster.") and path not in PATHS and not path.startswith(LATE)):
        raise ValueError(f"expected knobs.NAME=LO..HI, knobs.NAME=A,B,..., "
                         f"cluster.store_host=H,H,..., cluster.hosts=N..M, "
                         f"cluster.spares=N..M or cluster.start_at.HOST=LO..HI, got {spec!r}")
    if ".." in values:
        lo_s, _, hi_s = values.partition("..")
        try:
            lo, hi = _number(lo_s), _number(hi_s)
        except ValueError:
            raise ValueError(f"{path}: expected numbers LO..HI, got {values!r}") from None
        if not lo <= hi:
            raise ValueError(f"{path}: expected LO <= HI, got {values!r}")
        if path in SHAPES and not (isinstance(lo, int) and isinstance(hi, int) and lo >= 0):
            raise ValueError(f"{path}: expected whole numbers N..M (N >= 0), got {values!r}")
        return Vary(path, lo=lo, hi=hi, integers=isinstance(lo, int) and isinstance(hi, int))
    choices: list[Any] = []
    for v in values.split(","):
        if path in SHAPES:
            if not v.isdigit():
                raise ValueError(f"{path}: expected whole numbers N,M,..., got {values!r}")
            choices.append(int(v))
            continue
        try:
            choices.append(v if path.startswith("cluster.") else _number(v))
        except ValueError:
            choices.append(v)
    return Vary(path, tuple(choices))


def resized(names: Sequence[str], n: int) -> tuple[str, ...]:
    """The first ``n`` of ``names``, then plain hosts ``h<i>`` (smallest unused ``i``)."""
    out = list(names[:n])
    i = 0
    while len(out) < n:
        if f"h{i}" not in names and f"h{i}" not in out:
            out.append(f"h{i}")
        i += 1
    return tuple(out)


def _resize_raw(hosts: Any, n: int) -> Any:
    """A scenario's ``cluster.hosts`` (a count or a list) resized to ``n`` hosts."""
    if isinstance(hosts, int):
        return n
    names = [h if isinstance(h, str) else h["name"] for h in hosts]
    extra = resized(names, n)[len(hosts):]
    return [*hosts[:n], *extra]


def _started_late(hosts: Any, name: str, at: float) -> Any:
    """A scenario's ``cluster.hosts`` with host ``name`` starting at ``at`` (a name not
    among them: unchanged; the scenario's check names it)."""
    items = [f"h{i}" for i in range(hosts)] if isinstance(hosts, int) else list(hosts)
    out = []
    for h in items:
        spec = {"name": h} if isinstance(h, str) else dict(h)
        if spec["name"] == name:
            spec["start_at"] = at
        out.append(spec if len(spec) > 1 else spec["name"])
    return out


def shape_of(variation: Variation) -> int | None:
    """The number of hosts ``variation`` gives the cluster (None: the scenario's own)."""
    sizes = [int(v) for p, v in variation if p == "cluster.hosts"]
    return sizes[-1] if sizes else None


def shaped(space: FaultSpace, variation: Variation) -> FaultSpace:
    """The fault space of a case with ``variation``: its faults aim at the hosts of its
    own cluster shape (event triggers and spares on hosts it lacks left out)."""
    n = shape_of(variation)
    if n is None:
        return space
    hosts = resized(space.hosts, n)
    return dataclasses.replace(
        space, hosts=hosts, spare=tuple(h for h in space.spare if h in hosts),
        triggers=tuple(t for t in space.triggers if t.host is None or t.host in hosts))


def resolve_spares(sc: Scenario, varies: Sequence[Vary]) -> list[Vary]:
    """``cluster.spares`` turned into ``cluster.hosts`` counted from the scenario's maximum
    (its ``max_nodes`` or ``max_hosts`` knob); ScenarioError naming ``--vary`` where the
    protocol has no such knob or the search also varies it."""
    out = []
    for v in varies:
        if v.path != "cluster.spares":
            out.append(v)
            continue
        knobs = sc.knobs()
        name = next((k for k in MAX_KNOBS if isinstance(knobs.get(k), int)), None)
        if name is None:
            raise ScenarioError("--vary", v.path, f"the protocol has none of the knobs "
                                f"{', '.join(MAX_KNOBS)} to count spare hosts beyond")
        if any(w.path == f"knobs.{name}" for w in varies):
            raise ScenarioError("--vary", v.path, f"spares are counted beyond knobs.{name}, "
                                f"which is varied too; vary cluster.hosts instead")
        top = int(knobs[name])
        out.append(Vary("cluster.hosts", tuple(top + int(c) for c in v.choices),
                        top + v.lo, top + v.hi, v.integers))
    return out


def draw_variation(stream: str, varies: Sequence[Vary]) -> Variation:
    """The variation drawn from the random stream named ``stream``."""
    rng = random.Random(stream)
    return tuple((v.path, v.draw(rng)) for v in varies)


def apply_variation(sc: Scenario, variation: Variation, file: str = "<variation>") -> Scenario:
    """``sc`` with the variation's values (a cluster shape drops the scenario's own faults
    and expectations); ScenarioError if the scenario rejects them."""
    if not variation:
        return sc
    raw = scenario_dict(sc)
    for path, value in variation:
        if path.startswith("knobs."):
            raw["protocol"].setdefault("knobs", {})[path.removeprefix("knobs.")] = value
        elif path == "time_limit":
            raw["time_limit"] = value
        elif path.startswith(LATE):
            raw["cluster"]["hosts"] = _started_late(raw["cluster"]["hosts"],
                                                    path.removeprefix(LATE), float(value))
        elif path == "cluster.hosts":
            raw["cluster"]["hosts"] = _resize_raw(raw["cluster"]["hosts"], int(value))
            # its own faults and expectations were about its own cluster (a search
            # replaces both anyway)
            raw["faults"], raw["expect"] = [], {}
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
