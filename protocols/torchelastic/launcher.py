"""torchrun's ``launch_agent``: every host's first process (the registry's entry).

It creates the rendezvous handler (host the store on the store host, connect, install
the sentinel) *before* its try/finally, runs the agent, and in ``finally`` closes the
rendezvous for the whole job on exactly the paths upstream does:

=====================================================  ===========  =========
exit path                                              closes rdzv  exit code
=====================================================  ===========  =========
workers succeeded                                      yes          0
restarts exhausted (ChildFailedError)                  yes          1
any exception from the agent (rendezvous timeout or    yes          1
connection error, store timeout, unknown state, ...)
a spare of a closed rendezvous (run() returns None,    yes          1
``None.is_failed()`` raises AttributeError)
SIGINT before workers exist (KeyboardInterrupt)        yes          130
SIGTERM/SIGINT once workers exist (SignalException)    no           1
SIGTERM before workers exist (default action: killed)  no           -15
error while creating the handler (before ``try``)      no           1
=====================================================  ===========  =========
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime, StoreError
from elastic_sim.protocols.torchelastic.agent import (
    ElasticAgent,
    KeyboardInterruptBeforeWorkers,
    SignalException,
)
from elastic_sim.protocols.torchelastic.executor import CodecCost
from elastic_sim.protocols.torchelastic.handler import DynamicRendezvousHandler
from elastic_sim.protocols.torchelastic.knobs import TorchElasticKnobs
from elastic_sim.protocols.torchelastic.ops import RendezvousConnectionError, RendezvousError
from elastic_sim.protocols.torchelastic.state import NodeDesc

KEYBOARD_INTERRUPT_CODE = 130


class ChildFailedError(Exception):
    """The worker group ended FAILED (restarts exhausted)."""


def knobs_of(raw: Mapping[str, Any]) -> TorchElasticKnobs:
    """Knobs from process args (unknown keys ignored, upstream defaults for the rest)."""
    names = {f.name for f in dataclasses.fields(TorchElasticKnobs)}
    return TorchElasticKnobs(**{k: v for k, v in raw.items() if k in names})


async def create_handler(rt: Runtime, knobs: TorchElasticKnobs,
                         store_host: str) -> DynamicRendezvousHandler:
    """The c10d handler: the store host's agent serves the rendezvous TCPStore, everyone
    (the host included) is its client. RendezvousConnectionError if that fails."""
    try:
        if rt.host == store_host:
            await rt.host_store(knobs.store_port)
        store = await rt.connect_store(f"{store_host}:{knobs.store_port}", knobs.read_timeout)
    except StoreError as exc:
        raise RendezvousConnectionError(
            f"The connection to the C10d store has failed: {exc}") from exc
    handler = DynamicRendezvousHandler(rt, NodeDesc(rt.host, rt.info.pid, 0),
                                       knobs.rendezvous(), store,
                                       share_store=knobs.share_store,
                                       codec=CodecCost(knobs.state_codec_cost,
                                                       knobs.state_codec_cost_per_node))
    await handler.init()
    return handler


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Entry of every host: ``launch_agent`` with the scenario's knobs and workload."""
    knobs = knobs_of(args.get("knobs", {}))
    try:
        handler = await create_handler(rt, knobs, str(args["store_host"]))
    except RendezvousError as exc:
        rt.record("job_failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    agent = ElasticAgent(rt, handler, knobs, args.get("workload", {}), int(args.get("seed", 0)))
    rt.on_signal("INT", agent.keyboard_interrupt)
    shutdown_rdzv = True
    code = 1
    try:
        result = await agent.run()
        if result is None:
            raise AttributeError("'NoneType' object has no attribute 'is_failed'")
        if result.is_failed():
            raise ChildFailedError(f"worker group failed: exit codes {result.failures}")
        ckpt = agent.checkpoint or {}
        rt.record("job_done", step=int(ckpt.get("step", 0)), digest=str(ckpt.get("digest", "")))
        code = 0
    except SignalException as exc:
        shutdown_rdzv = False
        rt.record("job_failed", error=f"SignalException: {exc}")
    except KeyboardInterruptBeforeWorkers:
        rt.record("job_failed", error="KeyboardInterrupt")
        code = KEYBOARD_INTERRUPT_CODE
    except Exception as exc:  # ChildFailedError and every other error: same epilogue
        rt.record("job_failed", error=f"{type(exc).__name__}: {exc}")
    finally:
        if shutdown_rdzv:
            closed = await handler.shutdown()
            rt.record("rdzv_shutdown", closed=closed)
    return code
