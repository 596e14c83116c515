"""Real-mode broadcast: the Gloo adapter (``GlooGroup`` behind the contract) against raw
``torch.distributed.broadcast`` of the same bytes, in the same processes, on loopback; then
the tree and chain broadcasts over the adapter's send/recv (``protocols/broadcast.py``)
with the sim's alpha-beta prediction for each (``elastic_sim.sim.collectives.broadcast_seconds``).

Raw: the root broadcasts a tensor over its bytes, each receiver a fresh ``torch.empty``
(a state sync lands in new memory). Adapter: ``TracedGroup.broadcast`` of bytes; it
returns the bytes in a fresh buffer of its own, as raw's ``torch.empty``. What each method
is handed is made before the clock starts, alike: raw's root tensor, and the adapter's
zero placeholder that receivers pass (the contract's "a buffer of the same length", never
written: ``broadcast_bytes`` passes one too); a buffer either method receives into is
made, and freed, inside its timed region. Each repeat runs the methods in a rotated order
(raw first in one, last in another), so that no method always follows the same other one.
A figure is the slowest rank's time, best of ``--repeat``; ``ratio`` = raw / adapter (1.00:
the adapter costs nothing). The
prediction uses the sim's alpha, a loopback latency of ``--latency`` and the bandwidth of
the raw broadcast at world 2 of the same size (the one free parameter, fitted).

    flock /tmp/es-real.lock python benchmarks/bench_broadcast.py [--quick] [--sizes-mb 64 256]
        [--worlds 2 4] [--repeat 3] [--chunk-mb 4]

Prints a table per world and, last, ``min ratio X.XX`` (the adapter's worst cell).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALGORITHMS = ("tree", "chain")


class _BenchRuntime:
    """What TracedGroup asks of a runtime here: no trace, tasks on the loop."""

    def record(self, kind: str, **fields: Any) -> None:
        """Nothing is traced in a benchmark."""

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> Any:
        """A task of the loop (the chain's overlapping sends)."""
        return asyncio.ensure_future(coro)


def _payload(n: int) -> bytes:
    return (bytes(range(256)) * (n // 256 + 1))[:n]


async def _time_size(group: Any, rank: int, n: int, repeat: int,
                     chunk: int) -> dict[str, float]:
    """Best (slowest-rank) seconds of each method broadcasting ``n`` bytes from rank 0."""
    import torch
    import torch.distributed as dist

    from elastic_sim.protocols.broadcast import broadcast_bytes

    data = _payload(n) if rank == 0 else None
    mine = data if data is not None else bytes(n)  # a receiver's placeholder, never written
    root_t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data is not None else None
    last = (n - 1) % 256

    async def raw() -> bool:
        t = root_t if root_t is not None else torch.empty(n, dtype=torch.uint8)
        dist.broadcast(t, src=0)
        return int(t[-1]) == last

    async def adapter() -> bool:
        got = await group.broadcast(mine, 0)
        return len(got) == n and got[-1] == last

    async def algorithm(name: str) -> bool:
        got = await broadcast_bytes(group, data, 0, name, chunk)  # type: ignore[arg-type]
        return len(got) == n and got[-1] == last

    methods: list[tuple[str, Any]] = [("raw", raw), ("adapter", adapter)]
    methods += [(a, (lambda a=a: algorithm(a))) for a in ALGORITHMS]
    cell: dict[str, float] = {}
    for r in range(repeat):
        for name, fn in methods[r % len(methods):] + methods[:r % len(methods)]:
            dist.barrier()
            start = time.perf_counter()
            ok = await fn()
            t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
            assert ok, f"{name} delivered the wrong bytes"
            cell[name] = min(cell.get(name, float(t.item())), float(t.item()))
    return cell


async def _worker_main(rank: int, world: int, port: int, sizes: list[int], repeat: int,
                       chunk: int) -> dict[str, Any]:
    import torch.distributed as dist

    from elastic_sim.protocols.api import TracedGroup
    from elastic_sim.real.runtime.group import new_group
    from elastic_sim.real.runtime.store import connect_store, host_store

    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(4)

    def blocking(fn: Any) -> Any:
        return loop.run_in_executor(pool, fn)

    server = await host_store(blocking, "127.0.0.1", port) if rank == 0 else None
    client = await connect_store(blocking, "127.0.0.1", port, 60.0)
    raw_store = dist.TCPStore("127.0.0.1", port, is_master=False)
    dist.init_process_group("gloo", store=dist.PrefixStore("raw", raw_store), rank=rank,
                            world_size=world)
    inner = await new_group(blocking, "127.0.0.1", client, "adapter", rank, world, 600.0)
    group = TracedGroup(_BenchRuntime(), inner)  # type: ignore[arg-type]

    out = {str(n): await _time_size(group, rank, n, repeat, chunk) for n in sizes}
    inner.abort()
    dist.destroy_process_group()
    del server
    pool.shutdown(wait=False)
    return out


def _worker(rank: int, world: int, port: int, sizes: list[int], repeat: int, chunk: int,
            results: Any) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # the raw group on loopback too
    res = asyncio.run(_worker_main(rank, world, port, sizes, repeat, chunk))
    if rank == 0:
        results.put(json.dumps(res))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(world: int, sizes: list[int], repeat: int, chunk: int,
            timeout: float = 900.0) -> dict[str, dict[str, float]]:
    """Best times per size and method at ``world`` processes (every process cleaned up)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, sizes, repeat, chunk, results))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        out: dict[str, dict[str, float]] = json.loads(results.get(timeout=timeout))
        for p in procs:
            p.join(60)
        return out
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


def main() -> int:
    from elastic_sim.sim.collectives import broadcast_seconds
    from elastic_sim.world import CollectiveModel

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="64 MB only")
    p.add_argument("--sizes-mb", type=int, nargs="+", default=[64, 256])
    p.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--chunk-mb", type=float, default=4.0)
    p.add_argument("--latency", type=float, default=50e-6, help="loopback latency, s")
    args = p.parse_args()
    sizes = [64 << 20] if args.quick else [mb << 20 for mb in args.sizes_mb]
    chunk = int(args.chunk_mb * (1 << 20))
    alpha = CollectiveModel().alpha
    ratios: list[float] = []
    bw: dict[int, float] = {}
    for world in sorted(args.worlds):
        res = measure(world, sizes, args.repeat, chunk)
        print(f"\nworld {world} (seconds, slowest rank, best of {args.repeat}; "
              f"sim = alpha-beta prediction)")
        print("| MB | raw | adapter | ratio | tree | tree sim | chain | chain sim | "
              "group sim |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in sizes:
            cell = res[str(n)]
            ratio = cell["raw"] / cell["adapter"]
            ratios.append(ratio)
            bw.setdefault(n, n / cell["raw"])

            def sim(a: str, n: int = n, w: int = world) -> float:
                return broadcast_seconds(a, w, n, alpha, args.latency, bw[n], chunk)

            print(f"| {n >> 20} | {cell['raw']:.3f} | {cell['adapter']:.3f} | {ratio:.2f} | "
                  f"{cell['tree']:.3f} | {sim('tree'):.3f} | {cell['chain']:.3f} | "
                  f"{sim('chain'):.3f} | {sim('group'):.3f} |", flush=True)
    print("bandwidth fitted (raw broadcast, smallest world): "
          + ", ".join(f"{n >> 20} MB: {b / 1e9:.2f} GB/s" for n, b in bw.items()))
    print(f"min ratio {min(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
