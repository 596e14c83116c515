"""State broadcast by the group's broadcast, a binomial tree and a pipelined chain over
send/recv: every member ends with the root's bytes, at the alpha-beta model's time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.broadcast import broadcast_bytes
from elastic_sim.sim.collectives import broadcast_seconds
from elastic_sim.world import CollectiveModel
from tests.sim.simutil import L, group_of_hosts, make_world, of, simulate

M = "tests.sim.test_broadcast_algorithms"
BW = 1e9


def payload(n: int) -> bytes:
    return (bytes(range(251)) * (n // 251 + 1))[:n]  # not a multiple of any chunk


async def bcast_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    rank, size, root = int(rt.host[1:]), args["size"], args["root"]
    g = await group_of_hosts(rt, size, 30.0)
    t0 = rt.monotonic()
    mine = payload(args["n"]) if rank == root else None
    got = await broadcast_bytes(g, mine, root, args["algorithm"], args["chunk"])
    rt.record("got", ok=bytes(got) == payload(args["n"]), start=t0)
    return 0


def run(algorithm: str, size: int, root: int, n: int, chunk: int,
        latency: float = L) -> list[Any]:
    args = {"size": size, "root": root, "n": n, "algorithm": algorithm, "chunk": chunk}
    hosts = [f"h{i}" for i in range(size)]
    res, ev = simulate(make_world(f"{M}:bcast_main", hosts, args, bandwidth=BW,
                                  latency=latency))
    assert res.exit_codes == {f"{h}/main": 0 for h in hosts}
    return of(ev, "got")


@pytest.mark.parametrize("algorithm", ["group", "tree", "chain"])
@pytest.mark.parametrize(("size", "root"), [(1, 0), (2, 1), (3, 0), (5, 2), (8, 7), (13, 4)])
def test_every_member_gets_the_roots_bytes(algorithm: str, size: int, root: int) -> None:
    got = run(algorithm, size, root, n=10_000, chunk=3_000)  # 4 chunks, the last one short
    assert len(got) == size and all(e.data["ok"] for e in got)


@pytest.mark.parametrize("algorithm", ["group", "tree", "chain"])
@pytest.mark.parametrize("size", [2, 5, 8])
def test_time_is_the_alpha_beta_prediction(algorithm: str, size: int) -> None:
    n, chunk = 1 << 20, 1 << 18  # 4 equal chunks
    got = run(algorithm, size, 0, n, chunk)
    header = (size - 1) * (CollectiveModel().alpha + 2 * L + 8 / BW)  # the 8-byte size
    slowest = max(e.t - e.data["start"] for e in got)
    predicted = header + broadcast_seconds(algorithm, size, n, CollectiveModel().alpha,
                                           2 * L, BW, chunk)
    assert slowest == pytest.approx(predicted, rel=1e-9, abs=1e-12)


def test_on_a_fast_network_chain_beats_tree_beats_flat() -> None:
    n, chunk, size = 1 << 24, 1 << 20, 8  # payload time (16 ms) >> latency (0.1 ms)
    took = {a: max(e.t - e.data["start"] for e in run(a, size, 0, n, chunk, latency=50e-6))
            for a in ("group", "tree", "chain")}
    assert took["chain"] < took["tree"] < took["group"]
