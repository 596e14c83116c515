"""Upstream's Lighthouse as the Lighthouse host's process of ``--mode torchft``: a real
``torchft._torchft.LighthouseServer`` with the scenario's knobs, which stops, as the
model's does, once a replica group's launcher says the job ended and no replica
heartbeats any more (its status page shows every heartbeat's age)."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from elastic_sim.protocols.api import OperationTimeout
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.real.runtime.runtime import RealRuntime

SEEN = re.compile(r": seen ([0-9.]+)(ns|µs|us|ms|s) ago")
"""A heartbeat on the status page (a Rust ``Duration`` as ``Debug`` writes it)."""
SECONDS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
POLL = 0.5
"""Seconds between two looks at the job's end."""


def heartbeat_ages(url: str) -> list[float]:
    """How old each heartbeat the Lighthouse at ``url`` holds is (seconds)."""
    with urllib.request.urlopen(f"{url}/status", timeout=5.0) as f:
        page = f.read().decode(errors="replace")
    return [float(x) * SECONDS[unit] for x, unit in SEEN.findall(page)]


async def serve(rt: RealRuntime, knobs: TorchFTKnobs, port: int) -> int:
    """Run a LighthouseServer until the job ended and no replica heartbeats; 0."""
    from torchft._torchft import LighthouseServer

    address = rt.spec.address
    server = LighthouseServer(
        bind=f"{address}:{port}", min_replicas=knobs.min_replicas,
        join_timeout_ms=round(knobs.join_timeout * 1000),
        quorum_tick_ms=round(knobs.quorum_tick * 1000),
        heartbeat_timeout_ms=round(knobs.heartbeat_timeout * 1000))
    rt.record("lh_start", min_replicas=knobs.min_replicas, join_timeout=knobs.join_timeout,
              heartbeat_timeout=knobs.heartbeat_timeout)
    url = f"http://{address}:{port}"
    loop = asyncio.get_running_loop()
    ended = False
    try:
        while True:
            try:
                msg = await rt.recv(POLL)
                ended = ended or msg.body.get("method") == "lh_job_end"
            except OperationTimeout:
                pass
            if ended:
                ages = await loop.run_in_executor(None, heartbeat_ages, url)
                if all(age >= knobs.heartbeat_timeout for age in ages):
                    return 0
    finally:
        server.shutdown()
