"""``--mode torchft``: a torchft scenario run by upstream itself (torchft 0.2.0).

Real mode's launcher starts every host as an OS process (:mod:`elastic_sim.real`), and its
injector brings the faults, but what runs is upstream's code: the Lighthouse host runs a
real ``torchft._torchft.LighthouseServer`` (:mod:`.lighthouse`); every other host is a
replica group whose launcher (the model's, :class:`~elastic_sim.protocols.torchft.launcher.
ReplicaLauncher`, as torchrun runs one per replica group) hosts a real TCPStore and starts
ranks that train the bundled loop (:mod:`.loop`) on ``torchft.Manager`` with
``ProcessGroupGloo`` and the HTTP checkpoint transport. The loop records the events the
model records (quorums, reconfigurations, heals, votes, committed steps), read off
upstream's own objects, so the same checks and metrics judge both.

Importing this package imports neither torch nor torchft; the processes it starts do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOST_ENTRY = "elastic_sim.real.torchft.host:host_main"
"""Every host's first process in ``--mode torchft``."""
RANK_ENTRY = "elastic_sim.real.torchft.host:rank_main"
"""A rank process of a replica group in ``--mode torchft``."""
TORCHFT_INSTALL = "pip install torchft==0.2.0"
"""How a user gets upstream's torchft."""

NOT_JUDGED = {
    "ft_quorum_validity": "upstream's Lighthouse does not report the participants and "
    "heartbeats it decided on (the sim's Lighthouse does)",
}
"""Checks upstream's events cannot judge, with why."""


def refusal(protocol: str, knobs: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, why) if this scenario cannot run on upstream's torchft, else None."""
    if protocol != "torchft":
        return "protocol.name", (f"--mode torchft runs torchft scenarios; this one is "
                                 f"{protocol!r}")
    for name, value in knobs.items():
        if name.startswith("broken_") and value:
            return f"protocol.knobs.{name}", ("a variant broken on purpose exists in the "
                                              "model only, not in upstream's torchft")
    return None
