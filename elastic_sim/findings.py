"""A search's findings, one per mechanism (:class:`~elastic_sim.mechanisms.Signature`):
the cases that showed it counted under it, the smallest reproducer kept, and how it is
classified: **new** (no reproducer or finding in ``scenarios/found/`` records it; a
broken promise of the protocol's contract first among them) or **known** (recorded there:
upstream's known weak spot, or a defect already written up; the same check, witness kinds
and details with other roles count: the same mechanism on another cluster layout). Listed
new first, each mechanism on a line or two, the known ones one line per check, so that a
campaign on a generic scenario fits on one screen (:func:`listing`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elastic_sim.faults.model import Fault
from elastic_sim.mechanisms import Record, Signature
from elastic_sim.variation import Variation

STANDING = {"broken_promise": "broke its own promise",
            "weak_spot": "upstream's known weak spot",
            "outside_contract": "outside the contract's fault assumptions"}
"""How a finding stands against the protocol's contract, in words."""
SCREEN = 40
"""Lines the console's list of findings may take."""


@dataclass
class Finding:
    """One mechanism: where the search first met it, how often, and its shrunk
    reproducer."""

    signature: Signature
    message: str
    found_at: int
    original: tuple[Fault, ...]
    faults: tuple[Fault, ...]
    seed: int
    shrink_runs: int = 0
    tie_seed: int | None = None
    variation: Variation = ()
    reproducer: Path | None = None
    run_dir: Path | None = None
    trace_sha256: str = ""
    reproduced: bool | None = None
    """Whether its reproducer's run shows it (None: not run, the search's time was up)."""
    standing: str = "broken_promise"
    """Against the protocol's contract: broken_promise, weak_spot (a check the contract
    lists as upstream's known weak spot) or outside_contract (the schedule broke a fault
    assumption of the contract)."""
    reported: bool = True
    known: Record | None = None
    """Where ``scenarios/found/`` records this mechanism (None: it does not: new)."""
    cases: int = 1
    """Cases of the search that showed it."""
    fault_types: Counter[str] = field(default_factory=Counter)
    """The fault types of the schedules that showed it, and how often."""
    found_s: float = 0.0
    """Wall seconds into the search when the case that first showed it was judged."""
    cut: bool = False
    """Its shrink was cut short by the search's time."""
    shrinks: int = 0
    """Shrinks handed out for it (a later, smaller case is shrunk too: the smallest
    kept)."""
    shrunk: bool = False
    """A shrink's result is in (``faults`` is shrunk, not the case's own)."""

    @property
    def kind(self) -> str:
        """``broken_promise`` or ``new`` (not recorded in ``scenarios/found/``), else
        ``known``."""
        if self.known is not None:
            return "known"
        return "broken_promise" if self.standing == "broken_promise" else "new"

    @property
    def is_new(self) -> bool:
        """Not recorded in ``scenarios/found/``."""
        return self.known is None


ORDER = {"broken_promise": 0, "new": 1, "known": 2}


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """New first (broken promises first among them), then known; each in the order the
    search met them."""
    return sorted(findings, key=lambda f: (ORDER[f.kind], f.found_at, str(f.signature)))


def _faults(f: Finding) -> str:
    top = [t for t, _ in f.fault_types.most_common(3)]
    more = len(f.fault_types) - len(top)
    return ", ".join(top) + (f" +{more}" if more > 0 else "") if top else "no fault"


def _repro(f: Finding) -> str:
    if f.reproducer is None:
        return "no reproducer written"
    state = {True: "reproduced", False: "NOT reproduced", None: "not run"}[f.reproduced]
    return f"{len(f.faults)} fault(s), {state}: {f.reproducer.name}"


def listing(findings: Sequence[Finding], screen: int = SCREEN) -> list[str]:
    """The console's list of findings, at most ``screen`` lines: each new mechanism on
    two lines (what, then its reproducer), new first; the known ones one line per check;
    what does not fit counted in a last line (explore.json has every one)."""
    new = [f for f in ordered(findings) if f.is_new]
    known = [f for f in findings if not f.is_new]
    lines = [f"{len(findings)} mechanisms: {len(new)} new "
             f"({sum(f.kind == 'broken_promise' for f in new)} broken promises), "
             f"{len(known)} known (scenarios/found/)"]
    by_check: dict[str, list[Finding]] = {}
    for f in known:
        by_check.setdefault(f.signature.check, []).append(f)
    room = screen - len(lines) - (1 + len(by_check) if known else 0)
    left = len(new)
    if new:
        lines.append("NEW")
    for f in new:
        if room < 3 and left > 1:
            break
        tag = "BROKEN PROMISE" if f.kind == "broken_promise" else STANDING.get(
            f.standing, f.standing)
        lines.append(f"  [{tag}] {f.signature} x{f.cases} ({_faults(f)})")
        lines.append(f"      {f.message[:100]} -> {_repro(f)}")
        room -= 2
        left -= 1
    if left:
        lines.append(f"  ... {left} more new mechanisms in explore.json")
    if known:
        lines.append("KNOWN (upstream's known weak spots and recorded defects)")
        for check, fs in by_check.items():
            sources = sorted({f.known.source + ("" if f.known.exact else " (roles differ)")
                              for f in fs if f.known is not None})
            lines.append(f"  {check}: {len(fs)} mechanism(s), {sum(f.cases for f in fs)} "
                         f"cases; recorded in {', '.join(sources[:2])}"
                         + (f" +{len(sources) - 2}" if len(sources) > 2 else ""))
    return lines[:screen]


__all__ = ["SCREEN", "STANDING", "Finding", "listing", "ordered"]
