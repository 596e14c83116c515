"""What a process of a real run is started with: one JSON file named on its command line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.real.supervisor.workdir import write_atomic


@dataclass(frozen=True)
class ProcSpec:
    """Everything ``python -m elastic_sim.real.proc SPEC`` needs to become process ``name``."""

    name: str
    """``host/name``."""
    host: str
    entry: str
    """``"module:function"``."""
    args: Mapping[str, Any]
    workdir: str
    seed: int
    bind: str
    parent_pid: int
    """Who started it: it dies with that process."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment given by the parent on top of its own (what ``ProcessInfo.env`` shows)."""
    clock_offset: float = 0.0
    clock_drift: float = 0.0
    start_at: float = 0.0
    """Run time at which the entry starts (a host's first process only)."""
    t0: float | None = None
    """The run's time origin; None: wait for the launcher's ``GO <t0>`` on stdin."""
    sys_path: tuple[str, ...] = ()
    """Import path of the launcher, so entries it can import are importable here too."""
    hosts: tuple[str, ...] = ()
    """The world's host names. Addresses name hosts (``h0:29500``, as in the sim); in
    local mode each of them is this machine."""
    device: str = "cpu"
    """``cpu``: Gloo groups; ``cuda``: NCCL groups on this process's GPU."""
    addresses: Mapping[str, str] = field(default_factory=dict)
    """Host name -> its own network address, where each host has one (runs with a network
    cut); a host not named here is reached at this process's address."""

    @property
    def address(self) -> str:
        """Where other processes reach this process's servers."""
        return "127.0.0.1" if self.bind in ("0.0.0.0", "::", "") else self.bind

    def locate(self, host: str) -> str:
        """The network address of ``host`` (a world host name, or already an address)."""
        if host not in self.hosts:
            return host
        return self.addresses.get(host, self.address)

    def dump(self, path: Path) -> None:
        """Write this spec to ``path``."""
        write_atomic(path, json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> ProcSpec:
        """Read a spec written by :meth:`dump`."""
        obj = json.loads(path.read_text(encoding="utf-8"))
        obj["sys_path"] = tuple(obj.get("sys_path", ()))
        obj["hosts"] = tuple(obj.get("hosts", ()))
        obj["addresses"] = dict(obj.get("addresses", {}))
        return cls(**obj)
