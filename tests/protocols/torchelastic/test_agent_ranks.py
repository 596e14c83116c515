"""Worker rank assignment against torch's own ``SimpleElasticAgent._assign_worker_ranks``
(torch 2.13), run on a HashStore with one thread per agent: the same base ranks, world
sizes and role ranks for homogeneous and mixed-role jobs, on both paths."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from elastic_sim.protocols.torchelastic.agent_ranks import RoleInfo, compute_ranks, identical_ranks

torch = pytest.importorskip("torch", reason="the differential test needs torch 2.13")


def torch_ranks(roles: list[tuple[str, int]]) -> list[list[tuple[int, int, int, int]]]:
    """(global_rank, world_size, role_rank, role_world_size) of every worker, per agent,
    as torch assigns them; agent i is group rank i with roles[i] = (role, local_world)."""
    from torch.distributed import HashStore  # type: ignore[attr-defined]
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent

    store = HashStore()
    out: list[Any] = [None] * len(roles)
    errors: list[BaseException] = []

    def agent(group_rank: int) -> None:
        role, lws = roles[group_rank]
        spec = SimpleNamespace(role=role, local_world_size=lws)
        try:
            workers = SimpleElasticAgent._assign_worker_ranks(
                None, store, group_rank, len(roles), spec)
            out[group_rank] = [(w.global_rank, w.world_size, w.role_rank, w.role_world_size)
                               for w in workers]
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(g,)) for g in range(len(roles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    return out


def ours(roles: list[tuple[str, int]]) -> list[list[tuple[int, int, int, int]]]:
    infos = [RoleInfo(role, g, lws) for g, (role, lws) in enumerate(roles)]
    return [
        [(r.base_global_rank + i, r.global_world_size, r.base_role_rank + i, r.role_world_size)
         for i in range(lws)]
        for r, (_, lws) in zip(compute_ranks(infos), roles, strict=True)
    ]


@pytest.mark.parametrize("roles", [
    [("default", 1), ("default", 1), ("default", 1)],
    [("default", 4), ("default", 4)],
    [("trainer", 2), ("ps", 1), ("trainer", 3), ("ps", 2)],
    [("a", 1)],
])
def test_store_path_matches_torch(roles: list[tuple[str, int]]) -> None:
    assert ours(roles) == torch_ranks(roles)


def test_identical_fast_path_matches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_ELASTIC_WORKER_IDENTICAL", "1")
    roles = [("default", 3)] * 4
    expected = torch_ranks(roles)
    got = [[(r.base_global_rank + i, r.global_world_size, r.base_role_rank + i,
             r.role_world_size) for i in range(3)]
           for r in (identical_ranks(g, 4, 3) for g in range(4))]
    assert got == expected
