"""Host discovery sources as scenario data: what the discovery script prints on a given
call (a fixed list, a schedule keyed by rank 0's epoch, wall time or poll count, or a
random walk), and when it fails or hangs; plus what the run's discovery-source faults
(:class:`~elastic_sim.protocols.api.DiscoveryOverlay`) change about a call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elastic_sim.protocols.api import NO_DISCOVERY_FAULTS, DiscoveryOverlay
from elastic_sim.protocols.horovod.hosts import Rng, parse_host_slots
from elastic_sim.protocols.horovod.settings import Discovery, DiscoveryFailure, HostsAt, RandomHosts


class DiscoveryError(RuntimeError):
    """The discovery script exited non-zero."""


@dataclass(frozen=True)
class Probe:
    """What the driver knows when it runs the script: the 1-based poll number, the run
    time, and how many epoch lines rank 0 has logged."""

    poll: int
    time: float
    epochs_logged: int


def scheduled_hosts(schedule: Sequence[HostsAt], probe: Probe) -> list[str]:
    """The first entry whose key matches (an entry without a key always matches)."""
    for entry in schedule:
        if entry.epoch is not None:
            if entry.epoch == probe.epochs_logged:
                return list(entry.hosts)
        elif entry.until_s is not None:
            if probe.time < entry.until_s:
                return list(entry.hosts)
        elif entry.until_poll is not None:
            if probe.poll < entry.until_poll:
                return list(entry.hosts)
        else:
            return list(entry.hosts)
    return []


def epoch_hosts(schedule: Sequence[HostsAt], epoch: int) -> list[str]:
    """What an epoch-keyed schedule says for ``epoch`` (the test script's look-up:
    the entry for that epoch, else the last entry)."""
    for entry in schedule:
        if entry.epoch is not None and entry.epoch == epoch:
            return list(entry.hosts)
    return list(schedule[-1].hosts) if schedule else []


def overlaid(lines: Sequence[str], overlay: DiscoveryOverlay) -> list[str]:
    """The script's output lines with the run's discovery faults applied: removed hosts'
    lines dropped, added lines appended (unless the host is listed already)."""
    if overlay is NO_DISCOVERY_FAULTS:
        return list(lines)
    kept = [ln for ln in lines if ln.strip().split(":", 1)[0] not in overlay.removed]
    present = {ln.strip().split(":", 1)[0] for ln in kept}
    return kept + [ln for ln in overlay.added if ln.split(":", 1)[0] not in present]


def random_step(
    current: Sequence[str], spec: RandomHosts, rng: Rng
) -> list[str]:
    """One change of the random discovery: remove a host or re-add one, within bounds."""
    present = list(current)
    absent = [h for h in spec.hosts if h not in present]
    can_add = bool(absent) and len(present) < spec.max_hosts
    can_remove = len(present) > spec.min_hosts
    if not can_add and not can_remove:
        return present
    if can_add and (not can_remove or rng.random() < 0.5):
        return [*present, rng.choice(absent)]
    gone = rng.choice(present)
    return [h for h in present if h != gone]


class DiscoverySource:
    """The discovery script of one driver, with its random walk's state."""

    def __init__(self, spec: Discovery, default_slots: int, rng: Rng) -> None:
        self.spec = spec
        self.default_slots = default_slots
        self.rng = rng
        self._random_hosts: list[str] = []
        self._random_next = 0.0
        if spec.random is not None:
            self._random_hosts = list(spec.random.hosts[: spec.random.max_hosts])
            self._random_next = spec.random.every_s

    def fixed(self) -> bool:
        """Whether this is a fixed host list (``-H``, FixedHosts) rather than a script."""
        return not self.spec.schedule and self.spec.random is None

    def failure(self, poll: int) -> DiscoveryFailure | None:
        """The failure scheduled for this poll, if any."""
        return next((f for f in self.spec.failures if f.poll == poll), None)

    def find_available_hosts_and_slots(
        self, probe: Probe, overlay: DiscoveryOverlay = NO_DISCOVERY_FAULTS
    ) -> dict[str, int]:
        """``{host: slots}`` as the script would print them now, under ``overlay``."""
        failure = self.failure(probe.poll)
        if failure is not None and failure.mode == "error":
            raise DiscoveryError(f"discovery script failed on call {probe.poll}")
        if overlay.error:
            raise DiscoveryError(f"discovery script failed on call {probe.poll} "
                                 "(discovery_error fault)")
        return parse_host_slots(overlaid(self.lines(probe), overlay), self.default_slots)

    def lines(self, probe: Probe) -> list[str]:
        """The script's output lines."""
        spec = self.spec
        if spec.random is not None:
            while probe.time >= self._random_next:
                self._random_hosts = random_step(self._random_hosts, spec.random, self.rng)
                self._random_next += spec.random.every_s
            return list(self._random_hosts)
        if spec.schedule:
            return scheduled_hosts(spec.schedule, probe)
        return list(spec.hosts)
