"""Backends: the ways a :class:`~elastic_sim.spec.RunSpec` can be run, one per ``--mode``.

A backend is one class: its name, what it cannot run (its fault handler table and its
mode's rules, asked once when a spec is compiled), how it builds the run's world, and
``run(spec, emit, guard, progress) -> RunResult``. Everything around a run (recording the
trace, judging it, writing the summary and reports, campaigns) is the same for every
backend (:mod:`elastic_sim.pipeline`, :mod:`elastic_sim.campaign`). The built-in ones:
``sim`` (the simulator), ``real`` (the protocols as OS processes over TCP, a TCPStore and
Gloo) and ``torchrun`` (upstream's torchrun agents). Launchers (local, netns, slurm, k8s,
env) are options of the backends that place hosts on machines, not backends.

Adding a backend is a class and one line: ``register(MyBackend())``. ``--mode``'s choices,
``compare``'s modes and the contract and fault-vocabulary tests iterate :data:`BACKENDS`.
"""

from __future__ import annotations

from elastic_sim.backends.base import Backend, FaultTable, Progress, Refused
from elastic_sim.backends.real import RealBackend
from elastic_sim.backends.sim import SimBackend
from elastic_sim.backends.torchft import TorchftBackend
from elastic_sim.backends.torchrun import TorchrunBackend
from elastic_sim.errors import ScenarioError

__all__ = ["BACKENDS", "Backend", "FaultTable", "Progress", "RealBackend", "Refused",
           "SimBackend", "TorchftBackend", "TorchrunBackend", "backend", "names", "register"]

BACKENDS: dict[str, Backend] = {}
"""Every registered backend by name, in registration order (the built-in ones first)."""


def register(b: Backend) -> Backend:
    """Make ``b`` a ``--mode`` (replacing a backend of the same name); returns it."""
    BACKENDS[b.name] = b
    return b


def names() -> list[str]:
    """The registered backends' names, in registration order."""
    return list(BACKENDS)


def backend(name: str, where: str = "--mode") -> Backend:
    """The backend called ``name``; :class:`ScenarioError` (exit 2) naming the choices."""
    found = BACKENDS.get(name)
    if found is None:
        from elastic_sim.registry import suggest

        raise ScenarioError(where, "", f"unknown mode {name!r}{suggest(name, names())}; "
                            f"expected one of: {', '.join(names())}")
    return found


for _b in (SimBackend(), RealBackend(), TorchrunBackend()):
    register(_b)
register(TorchftBackend())
