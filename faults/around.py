"""A search around a scenario's own faults: every case keeps them, each as written or moved
within stated bounds (its time by up to ``shift`` seconds either way, its duration by up
to a factor ``scale`` either way, and, with ``retarget``, to another host), so that what a
search finds answers "what breaks this job", not "what breaks some job on these hosts".

A moved fault keeps its id; shrinking tries it as written first (:func:`as_written`), so a
reproducer keeps a move only where the mechanism needs it, and :func:`moves` says which
moved and how.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from elastic_sim.faults.model import Fault
from elastic_sim.faults.schedule import Chooser
from elastic_sim.faults.triggers import Triggered

SHIFT = 5.0
"""Default: seconds a scenario's fault may move either way."""
SCALE = 2.0
"""Default: factor its duration may change by either way."""


@dataclass(frozen=True)
class Around:
    """The scenario's own faults and how far a case may move them."""

    faults: tuple[Fault, ...]
    shift: float = SHIFT
    scale: float = SCALE
    retarget: bool = True

    @property
    def by_id(self) -> dict[str, Fault]:
        """The faults as written, by id."""
        return {f.id: f for f in self.faults}


def _field_names(f: Fault) -> set[str]:
    return {x.name for x in fields(f)} - set(type(f).derived)


def move(c: Chooser, f: Fault, around: Around, hosts: Sequence[str]) -> Fault:
    """``f`` as written (even odds, the simplest), else moved within the bounds."""
    if c.integer(0, 1) == 0:
        return f
    changes: dict[str, Any] = {}
    names = _field_names(f)
    if around.shift > 0 and not isinstance(f, Triggered):
        ms = round(around.shift * 1000)
        step = c.integer(0, ms) / 1000
        at = f.at + step if c.integer(0, 1) else max(0.0, f.at - step)
        changes["at"] = round(at, 3)
    duration = getattr(f, "duration", None)
    if around.scale > 1 and isinstance(duration, float) and duration > 0 and "duration" in names:
        exponent = c.integer(-1000, 1000) / 1000
        changes["duration"] = max(0.001, round(duration * around.scale ** exponent, 3))
    if around.retarget and "host" in names and isinstance(getattr(f, "host", None), str) \
            and f.host and len(hosts) > 1 and c.integer(0, 3) == 3:  # type: ignore[attr-defined]
        host = hosts[c.integer(0, len(hosts) - 1)]
        changes["host"] = host
        proc = getattr(f, "proc", "")
        if "proc" in names and isinstance(proc, str) and proc:
            changes["proc"] = f"{host}/{proc.partition('/')[2]}"
    return replace(f, **changes) if changes else f


def around_schedule(c: Chooser, around: Around, hosts: Sequence[str]) -> tuple[Fault, ...]:
    """The scenario's faults for one case, each as written or moved (those naming a host
    the case's cluster lacks left out)."""
    kept = [f for f in around.faults if all(h in hosts for h in f.hosts())]
    return tuple(move(c, f, around, hosts) for f in kept)


def as_written(f: Fault, pinned: Mapping[str, Fault]) -> Fault | None:
    """The scenario's own version of ``f`` where ``f`` is a moved one of its faults."""
    own = pinned.get(f.id)
    return own if own is not None and own != f else None


def moves(faults: Sequence[Fault], around: Around) -> list[str]:
    """How the scenario's faults stand in ``faults``: one line per fault that moved (what
    changed) or is missing; nothing for those kept as written."""
    own = around.by_id
    have = {f.id: f for f in faults}
    out = []
    for fid, f in own.items():
        g = have.get(fid)
        if g is None:
            out.append(f"{fid} left out (a host it names is not in this cluster)")
            continue
        changed = [f"{name} {getattr(f, name)!r} -> {getattr(g, name)!r}"
                   for name in sorted(_field_names(f)) if getattr(f, name) != getattr(g, name)]
        if changed:
            out.append(f"{fid} moved ({', '.join(changed)})")
    return out


__all__ = ["SCALE", "SHIFT", "Around", "around_schedule", "as_written", "move", "moves"]
