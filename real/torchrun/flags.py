"""A torchelastic scenario's knobs as torchrun's command line and environment.

Every host runs one ``torchrun`` agent at its own loopback address (host number ``i`` at
:func:`elastic_sim.real.faults.netns.host_address`, as real mode's partitioned runs): that
address is the agent's ``--local-addr``, so it names the node in the rendezvous (upstream
sorts nodes by it, as the model sorts them by host name) and it is where a rank-0 agent
serves the shared agent store (MASTER_ADDR). The store host's agent serves the rendezvous
store (``--rdzv-endpoint`` at its address, ``is_host=1`` in ``--rdzv-conf``).

Knobs upstream takes on the command line map onto it; the rendezvous timeouts go through
``--rdzv-conf``, which upstream reads as integer seconds. Knobs torchrun does not expose
keep upstream's value and are listed by :func:`unmapped`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_sim.real.faults.netns import host_address

RDZV_CONF_KNOBS = ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
                   "keep_alive_interval", "keep_alive_max_attempt", "read_timeout")
"""Knobs passed through ``--rdzv-conf`` (upstream reads each with ``get_as_int``)."""

FLAG_KNOBS = {"max_restarts": "--max-restarts", "monitor_interval": "--monitor-interval",
              "shutdown_timeout": "--shutdown-timeout", "nproc_per_node": "--nproc-per-node",
              "run_id": "--rdzv-id"}
"""Knobs that are torchrun flags of their own."""

WORKER_KNOBS = ("pg_timeout",)
"""Knobs the bundled worker takes (its process group and store-client timeout)."""

HANDLED = frozenset({"min_nodes", "max_nodes", "store_port", "share_store", *RDZV_CONF_KNOBS,
                     *FLAG_KNOBS, *WORKER_KNOBS})

UPSTREAM_FIXED = {"exit_barrier_timeout": 300.0, "stop_timeout": 30.0,
                  "identical_workers": False}
"""Knobs torchrun has no flag for, with the value upstream then uses."""

BUNDLED_WORKER = Path(__file__).resolve().parent / "worker.py"


def knob_problem(knobs: Mapping[str, Any]) -> tuple[str, str] | None:
    """(knob, why) for the first knob torchrun cannot be given, or None."""
    for key in RDZV_CONF_KNOBS:
        value = knobs.get(key)
        if value is not None and float(value) != int(float(value)):
            return key, (f"torchrun reads --rdzv-conf {key} as whole seconds; got {value} "
                         "(round it in the scenario to run it under --mode torchrun)")
    return None


def unmapped(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Knobs the scenario sets that torchrun cannot take, with upstream's value instead."""
    return {k: UPSTREAM_FIXED[k] for k in sorted(knobs)
            if k in UPSTREAM_FIXED and knobs[k] != UPSTREAM_FIXED[k]}


def _num(value: Any) -> Any:
    """A whole float as an int (torchrun parses some flags with ``int``)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass(frozen=True)
class Command:
    """How one host's agent is started."""

    host: str
    address: str
    argv: list[str]
    """torchrun's arguments (what follows ``torchrun`` on its command line)."""
    env: dict[str, str]


def commands(hosts: Sequence[str], store_host: str, port: int, knobs: Mapping[str, Any],
             workload: Mapping[str, Any], seed: int, script: Sequence[str],
             addresses: Mapping[str, str] | None = None) -> list[Command]:
    """One torchrun command per host. ``script``: the user's script and its arguments, or
    empty for the bundled worker following ``workload``."""
    addr = dict(addresses or {h: host_address(i) for i, h in enumerate(hosts)})
    conf = {k: int(float(knobs[k])) for k in RDZV_CONF_KNOBS if k in knobs}
    n = len(hosts)
    if script:
        target = list(script)
    else:
        target = [str(BUNDLED_WORKER), json.dumps(dict(workload), sort_keys=True), str(seed),
                  str(float(knobs.get("pg_timeout", 1800.0)))]
    out = []
    for h in hosts:
        rdzv_conf = ",".join([f"is_host={int(h == store_host)}",
                              *(f"{k}={v}" for k, v in conf.items())])
        argv = [f"--nnodes={knobs.get('min_nodes', n)}:{knobs.get('max_nodes', n)}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={addr[store_host]}:{port}",
                f"--rdzv-conf={rdzv_conf}", f"--local-addr={addr[h]}"]
        argv += [f"{flag}={_num(knobs[k])}" for k, flag in FLAG_KNOBS.items() if k in knobs]
        env = {"ELASTIC_SIM_HOST": h, "ELASTIC_SIM_ADDR": addr[h], "GLOO_SOCKET_IFNAME": "lo",
               "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "LOGLEVEL": "INFO"}
        if knobs.get("share_store") is False:
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        out.append(Command(h, addr[h], argv + target, env))
    return out
