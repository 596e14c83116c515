"""What a check says: a verdict and its violations, each with the few events that witness
it."""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_sim.trace import TraceEvent


@dataclass
class Violation:
    """One breach of a property, with its witnesses."""

    message: str
    witness: list[TraceEvent]


@dataclass
class CheckResult:
    """The verdict of one check."""

    name: str
    description: str
    violations: list[Violation] = field(default_factory=list)
    checked: int = 0
    """How many instances (rounds, groups, hosts) the check looked at."""

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations
