"""One Manager schedule run twice: by torchft 0.2.0's own ``ManagerServer`` per replica
group (a real Lighthouse behind them), whose ranks call ``ManagerClient._quorum``,
``should_commit`` and ``_checkpoint_metadata`` from threads; and by the model, which
feeds the same members to its ``LighthouseCore`` and gives each rank
``compute_quorum_results``. Every field of every rank's result, every vote's decision
and every metadata answer compared.

A schedule is replica groups (an id, a number of ranks, per round a step, should_commit
failures so far, ``init_sync`` and each rank's vote) and a number of rounds; in a round
every rank of every group asks for a quorum (the Lighthouse needs them all:
``min_replicas`` is the number of groups), then votes.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from elastic_sim.protocols.torchft.lighthouse_rules import LighthouseCore, LighthouseSettings
from elastic_sim.protocols.torchft.manager_server import member_of, quorum_request
from elastic_sim.protocols.torchft.quorum import Quorum
from elastic_sim.protocols.torchft.results import QuorumResult, compute_quorum_results
from tests.protocols.torchft.lighthouse_side import LONG, load

TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class Group:
    """One replica group: its id, ranks, and per round its step, should_commit failures,
    init_sync and each rank's vote."""

    replica_id: str
    ranks: int
    steps: tuple[int, ...]
    failures: tuple[int, ...]
    init_sync: tuple[bool, ...]
    votes: tuple[tuple[bool, ...], ...]

    def request(self, rnd: int, rank: int) -> dict[str, Any]:
        """Rank ``rank``'s quorum request in round ``rnd``."""
        return quorum_request(rank, self.steps[rnd], metadata(self, rank, rnd), False,
                              self.failures[rnd], self.init_sync[rnd])


@dataclass(frozen=True)
class ManagerSchedule:
    """Replica groups and how many rounds they go through."""

    groups: tuple[Group, ...]
    rounds: int


def metadata(g: Group, rank: int, rnd: int) -> str:
    """What a rank says its checkpoint server is, in a round."""
    return f"http://{g.replica_id}/rank{rank}/round{rnd}"


def store_of(g: Group) -> str:
    """A group's store address."""
    return f"store-{g.replica_id}:29600"


@dataclass
class Outcome:
    """What one side answered: results by (round, group, rank), decisions likewise,
    metadata by (round, group, rank)."""

    results: dict[tuple[int, str, int], dict[str, Any]]
    decisions: dict[tuple[int, str, int], bool]
    metadata: dict[tuple[int, str, int], str]


def result_fields(r: Any) -> dict[str, Any]:
    """A result's fields, as plain data (a real ``QuorumResult`` or the model's). The
    0.2.0 binding does not expose ``commit_failures`` (its stub lists it): only the fields
    a result has are compared."""
    out = {}
    for f in fields(QuorumResult):
        if hasattr(r, f.name):
            v = getattr(r, f.name)
            out[f.name] = list(v) if isinstance(v, list) else v
    return out


def run_model(s: ManagerSchedule, addresses: dict[str, str]) -> Outcome:
    """The model: the members each Manager server would send (its last rank's request),
    the Lighthouse model's quorum, each rank's ``compute_quorum_results``."""
    core = LighthouseCore(LighthouseSettings(len(s.groups), LONG, 0.1, LONG))
    out = Outcome({}, {}, {})
    for rnd in range(s.rounds):
        quorum: Quorum | None = None
        for i, g in enumerate(s.groups):
            m = member_of(g.replica_id, addresses[g.replica_id], store_of(g), g.ranks,
                          g.request(rnd, g.ranks - 1))
            for _token, q in core.request(rnd + i * 1e-3, m, g.replica_id, LONG):
                quorum = q
        assert quorum is not None, "every group asked: a quorum must be issued"
        for g in s.groups:
            for rank in range(g.ranks):
                res = compute_quorum_results(g.replica_id, rank, quorum, g.init_sync[rnd])
                out.results[(rnd, g.replica_id, rank)] = result_fields(res)
                out.decisions[(rnd, g.replica_id, rank)] = all(g.votes[rnd])
                out.metadata[(rnd, g.replica_id, rank)] = metadata(g, rank, rnd)
    return out


def run_real(s: ManagerSchedule) -> tuple[Outcome, dict[str, str]]:
    """The schedule against real Manager servers and a real Lighthouse; their answers and
    the servers' addresses."""
    ft = load()
    lh = ft.LighthouseServer(bind="127.0.0.1:0", min_replicas=len(s.groups),
                             join_timeout_ms=round(LONG * 1000), quorum_tick_ms=100,
                             heartbeat_timeout_ms=round(LONG * 1000))
    lh_addr = f"http://127.0.0.1:{lh.address().rsplit(':', 1)[1]}"
    servers = {g.replica_id: ft.ManagerServer(
        replica_id=g.replica_id, lighthouse_addr=lh_addr, hostname="127.0.0.1",
        bind="127.0.0.1:0", store_addr=store_of(g), world_size=g.ranks,
        heartbeat_interval=timedelta(milliseconds=100), connect_timeout=TIMEOUT,
        quorum_retries=0) for g in s.groups}
    addresses = {rid: srv.address() for rid, srv in servers.items()}
    clients = {(g.replica_id, r): ft.ManagerClient(addresses[g.replica_id], TIMEOUT)
               for g in s.groups for r in range(g.ranks)}
    out = Outcome({}, {}, {})
    lock = threading.Lock()
    try:
        for rnd in range(s.rounds):
            def ask(g: Group, rank: int, rnd: int = rnd) -> None:
                req = g.request(rnd, rank)
                res = clients[(g.replica_id, rank)]._quorum(
                    group_rank=rank, step=req["step"],
                    checkpoint_metadata=req["checkpoint_metadata"], shrink_only=False,
                    timeout=TIMEOUT, commit_failures=req["commit_failures"],
                    init_sync=req["init_sync"])
                with lock:
                    out.results[(rnd, g.replica_id, rank)] = result_fields(res)

            def vote(g: Group, rank: int, rnd: int = rnd) -> None:
                c = clients[(g.replica_id, rank)]
                decision = c.should_commit(rank, g.steps[rnd], g.votes[rnd][rank], TIMEOUT)
                meta = c._checkpoint_metadata(rank, TIMEOUT)
                with lock:
                    out.decisions[(rnd, g.replica_id, rank)] = bool(decision)
                    out.metadata[(rnd, g.replica_id, rank)] = str(meta)

            jobs = [(g, r) for g in s.groups for r in range(g.ranks)]
            for fn in (ask, vote):
                with ThreadPoolExecutor(len(jobs)) as pool:
                    list(pool.map(lambda job, fn=fn: fn(*job), jobs))  # type: ignore[misc]
    finally:
        for srv in servers.values():
            srv.shutdown()
        lh.shutdown()
    return out, addresses


def differ(s: ManagerSchedule) -> list[str]:
    """Run ``s`` on both sides; where they part ways (empty: nowhere)."""
    real, addresses = run_real(s)
    model = run_model(s, addresses)
    found = []
    for key, want in model.results.items():
        got = real.results.get(key)
        diff = {k: (got.get(k) if got else None, v) for k, v in want.items()
                if not got or (k in got and got[k] != v)}
        if diff:
            found.append(f"quorum {key}: (real, model) {diff}")
    for key, want_d in model.decisions.items():
        if real.decisions.get(key) != want_d:
            found.append(f"should_commit {key}: real {real.decisions.get(key)}, model {want_d}")
    for key, want_m in model.metadata.items():
        if real.metadata.get(key) != want_m:
            found.append(f"checkpoint_metadata {key}: real {real.metadata.get(key)}, "
                         f"model {want_m}")
    return found
