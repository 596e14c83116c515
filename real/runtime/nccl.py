"""NCCL process groups for real mode (``cluster.device: cuda``): GPU tensors behind the
contract's :class:`Group`, with the Gloo adapter's ordering, waiting and abort.

NCCL's failure semantics are not Gloo's: a dead or powered-off peer is not noticed by a
pending collective, which waits for the group's timeout. That timeout is the protocol's;
where a scenario leaves it to the backend it is NCCL's default, 10 minutes
(``kProcessGroupNCCLDefaultTimeout`` in torch 2.13's
``torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp``, which
``distributed_c10d._get_default_timeout`` picks for NCCL), settled when the world is built
(:func:`elastic_sim.world.collective_model`). With asynchronous error handling (torchrun's
workers get ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` from
``torch/distributed/elastic/agent/server/local_elastic_agent.py``; mode 1 is ``TearDown``
in ``ProcessGroupNCCL.hpp``) torch's watchdog then tears the whole process down; here
``TORCH_NCCL_BLOCKING_WAIT`` also makes the wait itself raise at the timeout, so the
failure reaches the protocol as the contract's :class:`CollectiveTimeout` unless the
watchdog has ended the process first (what an upstream agent sees as its worker's exit).
Each process uses GPU ``rank % device_count``.

Run on a GPU machine (one H200) by this project: see the README's NCCL section for what
was measured, and what is still estimated.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from elastic_sim.protocols.api import CollectiveFailed, Sendable, Store
from elastic_sim.real.runtime.aio import boundary
from elastic_sim.real.runtime.group import GlooGroup, c10d_store, collective_error
from elastic_sim.real.runtime.store import Blocking, torch_distributed


async def new_group(
    blocking: Blocking, store: Store, name: str, rank: int, size: int, timeout: float
) -> NcclGroup:
    """Join NCCL group ``name`` through ``store``; :class:`CollectiveFailed` when no GPU is
    visible, :class:`CollectiveTimeout` if the members do not all join in ``timeout``."""
    import torch

    os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    if not torch.cuda.is_available():
        raise CollectiveFailed(f"group {name}: cluster.device is cuda but this process sees "
                               "no GPU (torch.cuda.is_available() is False)")
    device = torch.device("cuda", rank % torch.cuda.device_count())
    dist = torch_distributed()
    c10d = await c10d_store(store, name)

    def create() -> Any:
        torch.cuda.set_device(device)
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timedelta(seconds=timeout)
        return dist.ProcessGroupNCCL(dist.PrefixStore(name, c10d), rank, size, opts)

    try:
        pg = await blocking(create)
    except (RuntimeError, OSError) as exc:
        raise collective_error(str(exc)) from None
    return NcclGroup(pg, name, rank, size, blocking, device)


class NcclGroup(GlooGroup):
    """One member's handle on an NCCL group: data goes through its GPU."""

    future_when_done = False

    def __init__(self, pg: Any, name: str, rank: int, size: int, blocking: Blocking,
                 device: Any) -> None:
        super().__init__(pg, name, rank, size, blocking)
        self.device = device

    @boundary
    async def _allreduce(self, values: list[float], name: str = "") -> list[float]:
        import torch

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        await self._run(lambda: self._pg.allreduce([t]))
        return [float(v) for v in t.cpu().tolist()]

    @boundary
    async def _broadcast(self, data: bytes, root: int, name: str = "") -> bytes:
        dist = torch_distributed()
        t = self._on_gpu(data)
        opts = dist.BroadcastOptions()
        opts.rootRank = root
        opts.rootTensor = 0
        await self._run(lambda: self._pg.broadcast([t], opts))
        return bytes(t.cpu().numpy().tobytes())

    @boundary
    async def _send(self, dst: int, data: Sendable) -> None:
        t = self._on_gpu(data)
        await self._run(lambda: self._pg.send([t], dst, 0))

    @boundary
    async def _recv(self, src: int, nbytes: int) -> bytes:
        t = self._on_gpu(bytes(nbytes))
        await self._run(lambda: self._pg.recv([t], src, 0))
        return bytes(t.cpu().numpy().tobytes())

    def _on_gpu(self, data: Sendable) -> Any:
        import torch

        if not data:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
