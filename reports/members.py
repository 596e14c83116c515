"""Members written for people: ``h0=0`` (a host and its rank), Horovod's ``h0:1=1`` (a
host and slot per rank), and long lists summarised, in name order, as runs of consecutive
names with their count: ``h0..h63 (64)``; a missing host starts a new run
(``h0..h9 h11..h63 (63)``); a run's ranks are shown when they run along with the names
(``h0..h63:0..7=0..511 (512)``: Horovod's 64 hosts of 8 slots).

The console, report.html, the campaign report and the timeline plot all write members
through this module, so they read the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

LIMIT = 8
"""Members written out one by one up to this many; longer lists are summarised."""
MAX_RUNS = 8
"""Runs written out in a summary; the rest are counted."""

_NUMBERED = re.compile(r"(.*?)(\d+)")
_HOST_SLOT = re.compile(r"(.*?)(\d+):")
_HOROVOD_WORKER = re.compile(r"w(\d+)\.\d+")
"""Horovod's worker processes are named ``<host>/w<local rank>.<spawn number>``."""


def member_ranks(members: Sequence[str],
                 ranks: Mapping[str, int]) -> list[tuple[str, int | None]]:
    """``(member, rank)`` in the round's order. A host listed more than once is Horovod's
    one entry per rank (``members[r]`` is rank r's host): each is ``host:slot``, the slot
    counted in rank order on its host (Horovod gives a host's slots consecutive ranks)."""
    if len(set(members)) == len(members):
        return [(h, ranks.get(h)) for h in members]
    slots: Counter[str] = Counter()
    out: list[tuple[str, int | None]] = []
    for rank, host in enumerate(members):
        out.append((f"{host}:{slots[host]}", rank))
        slots[host] += 1
    return out


@dataclass(frozen=True)
class _Run:
    """Members ``head+lo`` .. ``head+hi`` (then ``tail``), ranks ``r0`` .. ``r1``."""

    head: str
    lo: int
    hi: int
    r0: int | None
    r1: int | None
    tail: str = ""
    count: int = 1

    def follows(self, prev: _Run) -> bool:
        return (self.head, self.tail) == (prev.head, prev.tail) and self.lo == prev.hi + 1

    def after(self, prev: _Run) -> _Run:
        """``prev`` and this run as one (ranks kept only while they run along)."""
        ranked = self.r0 is not None and prev.r1 is not None and self.r0 == prev.r1 + 1
        return replace(prev, hi=self.hi, r0=prev.r0 if ranked else None,
                       r1=self.r1 if ranked else None, count=prev.count + self.count)

    def text(self) -> str:
        if self.lo == self.hi:
            names = f"{self.head}{self.lo}{self.tail}"
        elif self.head.endswith(":"):  # slots of one host: h3:0..7
            names = f"{self.head}{self.lo}..{self.hi}{self.tail}"
        else:
            names = f"{self.head}{self.lo}..{self.head}{self.hi}{self.tail}"
        if self.r0 is None:
            return names
        return f"{names}={self.r0}" if self.r0 == self.r1 else f"{names}={self.r0}..{self.r1}"


def _merge(runs: list[_Run | str]) -> list[_Run | str]:
    out: list[_Run | str] = []
    for run in runs:
        prev = out[-1] if out else None
        if isinstance(run, _Run) and isinstance(prev, _Run) and run.follows(prev):
            out[-1] = run.after(prev)
        else:
            out.append(run)
    return out


def _hosts_of_slots(run: _Run | str) -> _Run | str:
    """A run of one host's slots (``h3:0..7``) as one numbered host with the slots as its
    tail, so that hosts with the same slots merge in turn (``h0..h63:0..7``)."""
    if isinstance(run, str) or run.tail:
        return run
    m = _HOST_SLOT.fullmatch(run.head)
    if m is None:
        return run
    slots = f":{run.lo}" if run.lo == run.hi else f":{run.lo}..{run.hi}"
    n = int(m.group(2))
    return _Run(m.group(1), n, n, run.r0, run.r1, slots, run.count)


def _name_key(label: str) -> list[tuple[int, int | str]]:
    """Natural order: h2 before h10, h3:1 before h3:10."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", label)]


def _one(label: str, rank: int | None) -> str:
    return label if rank is None else f"{label}={rank}"


def summarise(items: Sequence[tuple[str, int | None]], limit: int = LIMIT) -> str:
    """``(member, rank)`` pairs as text: one by one (in the given order) up to ``limit``,
    else in name order as runs of consecutive names with the count."""
    if len(items) <= limit:
        return " ".join(_one(label, rank) for label, rank in items)
    runs: list[_Run | str] = []
    for label, rank in sorted(items, key=lambda item: _name_key(item[0])):
        m = _NUMBERED.fullmatch(label)
        runs.append(_Run(m.group(1), int(m.group(2)), int(m.group(2)), rank, rank)
                    if m else _one(label, rank))
    runs = _merge([_hosts_of_slots(r) for r in _merge(runs)])
    texts = [r if isinstance(r, str) else r.text() for r in runs]
    more = len(texts) - MAX_RUNS
    shown = " ".join(texts[:MAX_RUNS]) + (f" … +{more} runs" if more > 0 else "")
    return f"{shown} ({len(items)})"


def members_text(members: Sequence[str], ranks: Mapping[str, int],
                 limit: int = LIMIT) -> str:
    """A round's members with their ranks (:func:`member_ranks`, :func:`summarise`)."""
    return summarise(member_ranks(members, ranks), limit)


def hosts_text(hosts: Sequence[str], limit: int = LIMIT) -> str:
    """Host names without ranks, summarised the same way."""
    return summarise([(h, None) for h in hosts], limit)


def process_label(proc: str, host: str, ranks: Sequence[int]) -> str:
    """A timeline row's name: the process, Horovod's workers as ``host:slot``, and the
    ranks it held (``r0``, ``r0→2`` when a reset gave it another)."""
    name = proc
    local = proc.removeprefix(f"{host}/")
    m = _HOROVOD_WORKER.fullmatch(local)
    if m is not None:
        name = f"{host}:{m.group(1)} ({local})"
    if not ranks:
        return name
    shown = [str(r) for r in ranks]
    if len(shown) > 4:
        shown = [*shown[:2], "…", shown[-1]]
    return f"{name} r{'→'.join(shown)}"
