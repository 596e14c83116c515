"""What went wrong in a run, told apart by mechanism: the check that failed and, for each of
its witness events, the event's kind, the role of the host it happened on and the detail
that names what happened (an error's class and the store key it waited for, a barrier's
decision, an exit's kind), never by the fault types that happened to be around it. One
mechanism (an agent's local error closing the rendezvous for everyone) reached through
twenty combinations of unrelated faults is one :class:`Signature`.

A host's role at a witness event's time: ``coord`` (the host the others must reach: the
store's or the driver's), then ``rank0``, ``member`` (its rank in the last round it
learned) or ``spare`` (in no round yet). Whether a fault had hit it is left out: an
unrelated fault on the same host would make another mechanism of the same one (and stop
a shrink from dropping it). A fault witness is anonymous: ``fault``, not which fault or
whose. A liveness check's witnesses are the fault that opened its window and the event
that ended it; what the job did (how it ended, which error, on whom) is the mechanism,
the fault before it is context, counted under the finding by type (a Horovod campaign of
ten minutes met the same "job failed: horovod detected that one or more processes
failed" after thirteen classes of fault on five roles: 141 mechanisms where there is
one per ending). Recorded mechanisms written with a fault's class and role are read the
same way (:func:`anonymous`).

:func:`signatures_of` reads the mechanisms of one run; :class:`Known` is the registry of
the mechanisms recorded in ``scenarios/found/`` (``mechanisms.json`` there), by
protocol, which tells a new mechanism from upstream's known weak spot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from elastic_sim.checks import CheckResult
from elastic_sim.history import History, history

RUNNER = "elastic-sim"
"""The ``proc`` of the runner's own events (run start and end)."""


@dataclass(frozen=True, order=True)
class Signature:
    """A mechanism: the check, the kinds of its witness events (``where``) and who and what
    each witness is (``who``: role and detail per witness, ``|``-separated)."""

    check: str
    where: str
    who: str = ""

    def __str__(self) -> str:
        kinds = self.where.split(",")
        parts = self.who.split("|") if self.who else [""] * len(kinds)
        shown = ",".join(f"{k}({p})" if p else k for k, p in zip(kinds, parts, strict=False))
        return f"{self.check}@{shown}"

    def admits(self, other: Signature) -> bool:
        """Whether ``other`` is this mechanism (a shrink step must keep it)."""
        return self == other

    @property
    def what(self) -> str:
        """The mechanism without the roles: the check, the witness kinds and details (how
        a mechanism recorded on one cluster is recognised on another, where the store or
        rank 0 sits elsewhere)."""
        details = [p.partition(":")[2] for p in self.who.split("|")] if self.who else []
        return f"{self.check}@{self.where}#{'|'.join(details)}"


FAULT_CLASS: dict[str, str] = {
    "crash": "lost", "power_off": "lost", "crash_process": "process_lost",
    "crash_restart": "restarted", "hang": "frozen", "store_freeze": "frozen",
    "wedge": "wedged", "gpu_wedge": "gpu_wedged", "straggler": "slow",
    "slow_start": "slow_start",
    "crash_loop": "crash_loop", "preempt": "told_to_leave", "signal": "told_to_leave",
    "scale_down": "told_to_leave", "scale_up": "joined", "partition": "cut",
    "isolate": "cut", "isolate_store": "cut", "bridge": "cut", "one_way_partition": "cut",
    "conn_reset": "link", "link": "link", "clock_skew": "clock", "clock_jump": "clock",
    "store_crash": "store_lost", "collective": "collective",
    "discovery_add": "discovery", "discovery_remove": "discovery",
    "discovery_error": "discovery", "discovery_hang": "discovery",
}
"""A fault witness's class: what the fault did to its target, coarser than its type (a
mechanism that a crash and a power-off both reach is one)."""

DETAIL_FIELDS = ("decision", "outcome", "op", "code", "reason", "error")
"""The field of a witness event that names what happened (the first one it has)."""

_NAMED_ERROR = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Interrupt|Failed))")
_STORE_KEY = re.compile(r"\[\s*'([^']+)'")


def detail(kind: str, data: Mapping[str, Any]) -> str:
    """What a witness event says happened, stable across runs: a fault's class, an
    error's class (with the store key a timeout waited for, less its round and rank),
    a decision, an exit's kind."""
    if kind == "fault":
        t = str(data.get("type", ""))
        return FAULT_CLASS.get(t, t)
    for name in DETAIL_FIELDS:
        if name not in data:
            continue
        value = data[name]
        if name == "code":
            return "" if not isinstance(value, int) else (
                "killed" if value < 0 else "ok" if value == 0 else f"exit {value}")
        if name in ("error", "reason"):
            return error_class(str(value))
        return str(value)
    return ""


def error_class(text: str) -> str:
    """An error message's class: its exception name (with the store key a store call
    named, round and rank numbers dropped), else its first words."""
    named = _NAMED_ERROR.match(text)
    if named is None:
        words = re.findall(r"[A-Za-z]+", text)[:4]
        return " ".join(words).lower()
    key = _STORE_KEY.search(text)
    if key is None:
        return named.group(1)
    parts = [p for p in key.group(1).split("/")[1:] if not p.isdigit()]
    return f"{named.group(1)} {'/'.join(parts[-2:])}" if parts else named.group(1)


def hosts_in(target: Any) -> Iterable[str]:
    """The hosts a fault event's target names (a host, ``host/proc``, sides, ends)."""
    if isinstance(target, str):
        if target and target != "*":
            yield target.split("/", 1)[0]
    elif isinstance(target, Mapping):
        for v in target.values():
            yield from hosts_in(v)
    elif isinstance(target, (list, tuple)):
        for v in target:
            yield from hosts_in(v)


class Roles:
    """Who each host was, over one run: the coordinator, the rank it last learned."""

    def __init__(self, hist: History) -> None:
        start = hist.first("run_start")
        self.coordinator = str(start.get("coordinator") or "") if start is not None else ""
        self.ranks: dict[str, list[tuple[float, Any]]] = {}
        for ev in hist.of("rdzv_done"):
            self.ranks.setdefault(ev.host, []).append((ev.t, ev.get("rank")))

    def of(self, host: str, t: float, kind: str, data: Mapping[str, Any]) -> str:
        """The role of ``host`` at run time ``t`` (``-``: no host, the runner's events)."""
        if host in ("", "*"):
            return "-"
        parts = ["coord"] if host == self.coordinator else []
        rank = data.get("rank") if kind == "rdzv_done" else None
        if rank is None:
            learned = [r for at, r in self.ranks.get(host, ()) if at <= t]
            rank = learned[-1] if learned else None
        if kind == "rdzv_done" and any(r == 0 for at, r in self.ranks.get(host, ())
                                       if at == t):
            rank = 0  # a host of several workers: the one of rank 0 names it
        parts.append("spare" if rank is None else "rank0" if rank == 0 else "member")
        return "+".join(parts)


def signatures_of(checks: Sequence[CheckResult], ignore: Collection[str] = (),
                  events: Sequence[Any] = ()) -> dict[Signature, str]:
    """Every distinct mechanism of one run, with its first message (checks named in
    ``ignore`` left out): per check and kinds of witness events, its first violation's,
    read with the roles of ``events`` (the run's trace)."""
    roles: Roles | None = None
    out: dict[Signature, str] = {}
    seen: set[tuple[str, str]] = set()
    for c in checks:
        if c.name in ignore:
            continue
        for v in c.violations:
            where = ",".join(ev.kind for ev in v.witness)
            if (c.name, where) in seen:
                continue
            seen.add((c.name, where))
            if roles is None:
                roles = Roles(history(events))
            who = "|".join(
                ":".join(x for x in (roles.of(ev.host, ev.t, ev.kind, ev.data),
                                     detail(ev.kind, ev.data)) if x)
                for ev in v.witness)
            out.setdefault(anonymous(Signature(c.name, where, who)), v.message)
    return out


def parse(text: str) -> Signature:
    """The signature ``str(signature)`` wrote (``check@kind(who),kind(who)``)."""
    check, _, rest = text.partition("@")
    kinds, whos = [], []
    for part in _split_witnesses(rest):
        kind, _, who = part.partition("(")
        kinds.append(kind)
        whos.append(who[:-1] if who.endswith(")") else who)
    return Signature(check, ",".join(kinds), "|".join(whos) if any(whos) else "")


def anonymous(sig: Signature) -> Signature:
    """``sig`` with its fault witnesses anonymous (no class, no role), as
    :func:`signatures_of` names mechanisms: how a mechanism recorded with them is read."""
    kinds = sig.where.split(",")
    whos = sig.who.split("|") if sig.who else [""] * len(kinds)
    kept = ["" if k == "fault" else w for k, w in zip(kinds, whos, strict=False)]
    return Signature(sig.check, sig.where, "|".join(kept) if any(kept) else "")


def _split_witnesses(text: str) -> list[str]:
    """``a(x,y),b(z)`` -> ``["a(x,y)", "b(z)"]``: commas inside parentheses kept."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur:
        out.append(cur)
    return out


# -- the mechanisms recorded in scenarios/found/ ------------------------------------------

REGISTRY = "mechanisms.json"
"""The file in ``scenarios/found/`` that lists every recorded mechanism, by protocol."""


@dataclass(frozen=True)
class Record:
    """A recorded mechanism: where it is written up (a reproducer, or a finding of the
    folder's README); ``exact`` False: a mechanism matched it by check, witness kinds and
    details, its roles differing (the same mechanism on another cluster layout)."""

    mechanism: str
    source: str
    exact: bool = True


def found_dir() -> Path:
    """The folder of recorded findings (package data: ``elastic_sim/scenarios/found``)."""
    from elastic_sim.builtin import builtin_dir

    return builtin_dir() / "found"


class Known:
    """The mechanisms recorded in ``scenarios/found/``, by protocol."""

    def __init__(self, records: Mapping[str, Sequence[Record]]) -> None:
        self.records: dict[str, dict[str, Record]] = {}
        self.loose: dict[str, dict[str, Record]] = {}
        for p, rs in records.items():
            for r in rs:
                sig = anonymous(parse(r.mechanism))
                self.records.setdefault(p, {}).setdefault(str(sig), r)
                self.loose.setdefault(p, {}).setdefault(
                    sig.what, Record(r.mechanism, r.source, exact=False))

    def match(self, protocol: str, sig: Signature) -> Record | None:
        """The record of this mechanism in this protocol: the same one, else one that
        differs only in the witnesses' roles; None: not recorded."""
        exact = self.records.get(protocol, {}).get(str(sig))
        return exact or self.loose.get(protocol, {}).get(sig.what)

    @staticmethod
    def read(path: Path) -> Known:
        """The registry file ``path`` (none there: nothing known)."""
        if not path.is_file():
            return Known({})
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Known({p: [Record(r["mechanism"], r["source"]) for r in rs]
                      for p, rs in raw.get("protocols", {}).items()})


@lru_cache(maxsize=1)
def known() -> Known:
    """The registry shipped with elastic-sim (read once)."""
    return Known.read(found_dir() / REGISTRY)


__all__ = [
    "FAULT_CLASS",
    "Known",
    "Record",
    "Roles",
    "Signature",
    "anonymous",
    "detail",
    "error_class",
    "found_dir",
    "hosts_in",
    "known",
    "parse",
    "signatures_of",
]
