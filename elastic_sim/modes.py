"""The built-in backends as the command line names them, without importing them: their
names, one-line summaries and whether they take a training script (``--help`` and
argument errors import no simulator). Each backend class reads its own line from here;
a test checks that :data:`elastic_sim.backends.BACKENDS` agrees."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    """One ``--mode``: its name, what it runs, and whether ``--script`` applies."""

    name: str
    summary: str
    takes_script: bool = False


MODES = {m.name: m for m in (
    Mode("sim", "the deterministic simulator (virtual time)"),
    Mode("real", "the same protocols as OS processes over TCP, TCPStore and Gloo"),
    Mode("torchrun", "upstream's torchrun agents (torchelastic scenarios)", takes_script=True),
)}
"""The built-in modes by name, in registration order."""
