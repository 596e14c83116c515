"""Knobs and workload of the static protocol, with their defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_sim.protocols.broadcast import Algorithm
from elastic_sim.protocols.ranges import HostCount, Period, Port, PosCount, Seconds


@dataclass(frozen=True)
class StaticKnobs:
    """How the static protocol forms rounds and handles failures."""

    min_hosts: HostCount = 1
    """A round forms only once this many hosts have joined."""
    max_hosts: PosCount = 1_000_000
    """A round closes at once when this many have joined; later arrivals wait."""
    last_call: Seconds = 1.0
    """After min_hosts have joined, wait this long for more before closing the round."""
    join_timeout: Seconds = 600.0
    """Give up (job fails) if a round does not reach min_hosts within this."""
    group_timeout: Period = 30.0
    """Process-group timeout: a hung peer is detected after this."""
    store_timeout: Period = 60.0
    """Store client timeout (connect, get, wait)."""
    store_port: Port = 29400
    """Port of the store server on the store host."""
    admit_waiting: bool = True
    """At each commit, leave the round if hosts are waiting for the next one (scale up)."""
    skip_state_broadcast: bool = False
    """BROKEN on purpose: members keep their own state instead of the root's after a round
    forms. Exists so the checks can be shown to fail."""
    broken_rejoin_at_commit: bool = False
    """BROKEN on purpose: every member leaves its round at each commit and forms the same
    world again, though nothing failed (a pointless reconfiguration)."""
    broken_uneven_sync: bool = False
    """BROKEN on purpose: ranks other than 0 enter the sync's first allreduce with one
    element more (members disagree on the collective sequence)."""
    broken_late_round_record: bool = False
    """BROKEN on purpose: in rounds after the first, the last-ranked member enters the new
    round's collectives before it adopts (records) the new membership, i.e. as a process
    of the older round (no epoch isolation)."""
    broken_spin_at_commit: bool = False
    """BROKEN on purpose: at its first commit a member busy-loops without letting time
    pass (a livelock: the simulator stops the run, ``time_advances`` fails)."""
    broken_close_without_the_world: bool = False
    """BROKEN on purpose: hosts that arrive while a world trains close the next round among
    themselves as soon as min_hosts of them are there, without waiting for a member of the
    world: two worlds train side by side (a split brain)."""
    broken_drop_last_arrival: bool = False
    """BROKEN on purpose: a round after the first leaves out its last arrival, a healthy
    host (eviction)."""


@dataclass(frozen=True)
class Workload:
    """The training job the protocol runs."""

    steps: int = 100
    step_time: float = 0.1
    """Compute seconds per step, before the step's allreduce."""
    commit_every: int = 10
    state_bytes: int = 1 << 20
    """Size of the model state broadcast at every sync."""
    params: int = 8
    """Number of (simulated) model parameters that the allreduce updates."""
    batch_size: int = 32
    """Samples each rank consumes per step (what "samples lost" counts)."""
    state_broadcast: Algorithm = "group"
    """How a state sync moves the root's state: ``group`` (the group's broadcast), ``tree``
    (binomial, over send/recv) or ``chain`` (pipelined, over send/recv); see
    :mod:`elastic_sim.protocols.broadcast`."""
    hosts: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per-host differences, by host name: ``steps`` (its workers train only up to this
    step, then end with success: the host finishes early) and ``step_factor`` (its compute
    per step takes this many times ``step_time``: a slower machine)."""

    def for_host(self, host: str) -> Workload:
        """The workload as ``host``'s processes run it (its own steps and step time)."""
        mine = self.hosts.get(host)
        if not mine:
            return self
        return dataclasses.replace(
            self, steps=min(self.steps, int(mine.get("steps", self.steps))),
            step_time=self.step_time * float(mine.get("step_factor", 1.0)))
