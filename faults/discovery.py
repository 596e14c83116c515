"""What discovery-source faults do to a discovery source: the faults in effect, folded into
one :class:`~elastic_sim.protocols.api.DiscoveryOverlay` (plain data a runtime hands to protocols).

Pure: the injector of a runtime adds a fault when it fires and drops it when it heals; the
overlay at time ``now`` follows from the faults in effect, in the order they fired (a later
add or remove of the same host wins)."""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_sim.faults.model import (
    DiscoveryAdd,
    DiscoveryRemove,
    DiscoveryScriptError,
    DiscoveryScriptHang,
    Fault,
)
from elastic_sim.protocols.api import NO_DISCOVERY_FAULTS, DiscoveryOverlay


@dataclass
class DiscoveryFaults:
    """The discovery-source faults in effect, in firing order."""

    active: list[tuple[Fault, float]] = field(default_factory=list)
    """Each fault with the time it took effect."""

    def start(self, fault: Fault, now: float) -> None:
        """``fault`` takes effect at ``now``."""
        self.active.append((fault, now))

    def heal(self, fault: Fault) -> None:
        """``fault`` ends."""
        self.active = [(f, t) for f, t in self.active if f is not fault]

    def overlay(self, now: float) -> DiscoveryOverlay:
        """What a discovery call made at ``now`` sees."""
        if not self.active:
            return NO_DISCOVERY_FAULTS
        change: dict[str, str | None] = {}  # host -> line to add, None: removed
        error = False
        hang_until = now
        for f, since in self.active:
            if isinstance(f, DiscoveryAdd):
                change.pop(f.host, None)
                change[f.host] = f.line()
            elif isinstance(f, DiscoveryRemove):
                change.pop(f.host, None)
                change[f.host] = None
            elif isinstance(f, DiscoveryScriptError):
                error = True
            elif isinstance(f, DiscoveryScriptHang):
                hang_until = max(hang_until, since + f.duration)
        return DiscoveryOverlay(
            added=tuple(line for line in change.values() if line is not None),
            removed=tuple(h for h, line in change.items() if line is None),
            error=error,
            hang_s=hang_until - now,
        )
