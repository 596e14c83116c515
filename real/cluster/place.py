"""Where a node stands in the run, read from the environment its cluster launcher gives it.

Slurm sets ``SLURM_PROCID``/``SLURM_NTASKS``; a Kubernetes Indexed Job sets
``JOB_COMPLETION_INDEX`` (the node count comes from ``ES_NODES``); anything else (mpirun,
pdsh, torchrun used as a launcher) follows the plain contract ``RANK``/``WORLD_SIZE``.
The coordinator's address is ``ES_COORDINATOR`` (``host:port``) unless the command line
names it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

COORDINATOR_ENV = "ES_COORDINATOR"
NODES_ENV = "ES_NODES"


class PlacementError(ValueError):
    """The environment does not say where this node stands."""


@dataclass(frozen=True)
class Placement:
    """This node's index among ``count`` nodes, the coordinator's address, and which
    launcher's variables said so."""

    index: int
    count: int
    coordinator: tuple[str, int]
    source: str


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        value = int(env[name])
    except ValueError:
        raise PlacementError(f"${name}={env[name]!r}: expected a whole number") from None
    if value < 0:
        raise PlacementError(f"${name}={value}: expected a number >= 0")
    return value


def parse_address(text: str, what: str = COORDINATOR_ENV) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as a pair; PlacementError if malformed."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PlacementError(f"{what}={text!r}: expected host:port")
    return host, int(port)


def placement(
    env: Mapping[str, str] | None = None,
    index: int | None = None,
    count: int | None = None,
    coordinator: str | None = None,
) -> Placement:
    """This node's placement: explicit arguments first, then the launcher's variables."""
    env = os.environ if env is None else env
    source = "command line"
    if index is None or count is None:
        if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
            source, i, n = "slurm", _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        elif "JOB_COMPLETION_INDEX" in env:
            if NODES_ENV not in env:
                raise PlacementError(f"a Kubernetes Indexed Job's pod needs ${NODES_ENV}")
            source, i, n = "k8s", _int(env, "JOB_COMPLETION_INDEX"), _int(env, NODES_ENV)
        elif "RANK" in env and "WORLD_SIZE" in env:
            source, i, n = "env", _int(env, "RANK"), _int(env, "WORLD_SIZE")
        else:
            raise PlacementError(
                "cannot tell this node's index: pass --index and --count, or run under "
                "Slurm (SLURM_PROCID/SLURM_NTASKS), a Kubernetes Indexed Job "
                "(JOB_COMPLETION_INDEX with ES_NODES), or set RANK and WORLD_SIZE")
        index = i if index is None else index
        count = n if count is None else count
    if not 0 <= index < count:
        raise PlacementError(f"node index {index} is not within 0..{count - 1}")
    text = coordinator or env.get(COORDINATOR_ENV)
    if not text:
        raise PlacementError(
            f"no coordinator address: pass --coordinator or set ${COORDINATOR_ENV}")
    return Placement(index, count, parse_address(text), source)


def share(hosts: tuple[str, ...], count: int, index: int) -> tuple[str, ...]:
    """The scenario hosts node ``index`` of ``count`` runs: round-robin, in scenario order."""
    return hosts[index::count]
