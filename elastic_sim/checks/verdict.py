"""What a check says: a verdict and its violations, each with the few events that witness
it, and what the check examined (a check that examined nothing is not applicable, never a
pass)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from elastic_sim.trace import TraceEvent
from elastic_sim.vocabulary import recorded

Status = Literal["pass", "fail", "n/a"]


@dataclass
class Violation:
    """One breach of a property, with its witnesses: recorded events (a check reads the
    neutral events of :mod:`elastic_sim.vocabulary`; each shows as the event recorded)."""

    message: str
    witness: list[TraceEvent]

    def __post_init__(self) -> None:
        self.witness = [recorded(ev) for ev in self.witness]


@dataclass
class CheckResult:
    """The verdict of one check."""

    name: str
    description: str
    violations: list[Violation] = field(default_factory=list)
    checked: int = 0
    """How many instances (rounds, groups, hosts) the check looked at."""
    unit: str = "instances"
    """What one examined instance is, plural ("rounds", "hosts", "job ends")."""
    not_judged: str = ""
    """Why the run's events cannot judge this check ("" when they can): such a check
    neither passes nor fails, it says so."""
    seconds: float = field(default=0.0, compare=False)
    """Wall-clock seconds the check took to judge the run (for a CI's test times; not
    part of the verdict, nor of summary.json)."""

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations

    @property
    def applicable(self) -> bool:
        """The check examined something (or found a violation)."""
        return self.checked > 0 or bool(self.violations)

    @property
    def status(self) -> Status:
        """"fail" with a violation, "n/a" when nothing was examined, else "pass"."""
        if self.violations:
            return "fail"
        return "pass" if self.checked > 0 else "n/a"

    @property
    def examined(self) -> str:
        """What the verdict rests on, e.g. "12 rounds checked" or "nothing to check"."""
        if self.not_judged:
            return f"not judged: {self.not_judged}"
        if self.checked == 0:
            return "nothing to check" if not self.violations else "violated"
        plain = "," not in self.unit and " and " not in self.unit  # a list stays plural
        one = self.checked == 1 and plain and self.unit.endswith("s")
        unit = self.unit[:-1] if one else self.unit
        return f"{self.checked} {unit} checked"
