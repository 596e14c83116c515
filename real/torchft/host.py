"""The process entries of ``--mode torchft``: every host's first process (the Lighthouse,
or a replica group's launcher) and a replica group's rank, on real mode's runtime."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import JSON, Runtime
from elastic_sim.protocols.torchft.launcher import ReplicaLauncher
from elastic_sim.protocols.torchft.lighthouse import lighthouse_address
from elastic_sim.protocols.torchft.train import knobs_of
from elastic_sim.real.runtime.runtime import RealRuntime
from elastic_sim.real.torchft import RANK_ENTRY


def _real(rt: Runtime) -> RealRuntime:
    assert isinstance(rt, RealRuntime), "--mode torchft runs on real mode's runtime"
    return rt


def lighthouse_url(rt: Runtime, args: Mapping[str, Any]) -> str:
    """Where upstream's Lighthouse serves (``http://address:port``)."""
    host = _real(rt).spec.locate(str(args["store_host"]))
    return f"http://{host}:{int(args['lighthouse_port'])}"


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """The Lighthouse on the store host, a replica group's launcher everywhere else."""
    knobs = knobs_of(args.get("knobs", {}))
    lighthouse_host = str(args["store_host"])
    if rt.host == lighthouse_host:
        from elastic_sim.real.torchft.lighthouse import serve

        return await serve(_real(rt), knobs, int(args["lighthouse_port"]))
    launcher = ReplicaLauncher(rt, knobs, args, lighthouse_url(rt, args), RANK_ENTRY,
                               lighthouse_address(lighthouse_host))
    return await launcher.run()


async def rank_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """A rank: upstream's training loop (:func:`.loop.train`) on a thread of its own, its
    events recorded on the runtime's loop."""
    from elastic_sim.real.torchft.loop import train

    real = _real(rt)
    loop = asyncio.get_running_loop()

    def record(kind: str, **fields: JSON) -> None:
        loop.call_soon_threadsafe(functools.partial(rt.record, kind, **fields))

    host, _, port = str(args["store_address"]).rpartition(":")
    store = (real.spec.locate(host), int(port))
    code: int = await loop.run_in_executor(
        None, functools.partial(train, args, record, rt.host, real.spec.address, store))
    await asyncio.sleep(0)  # let the last events reach the trace
    return code
