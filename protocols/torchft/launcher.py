"""Every host's first process (the registry's entry): the Lighthouse on the scenario's
store host, and on every other host one replica group's launcher, which does what
torchft's TorchX component runs per replica group (``torchrun --nnodes=1
--nproc_per_node=<ranks> --max_restarts=<n>``, torchft/torchx.py ``hsdp``):

- it hosts the group's store (torchrun's ``MASTER_ADDR:MASTER_PORT``), which outlives the
  ranks, so a rank of a later attempt may read what the previous attempt wrote there;
- it starts the group's ranks, watches their exit codes every ``monitor_interval``, and
  when one fails stops the others (SIGTERM, SIGKILL after ``stop_timeout``) and starts
  them all again, ``replica_restarts`` times; each start is a new replica id;
- once its ranks are done (or it gave up), it tells the Lighthouse the job ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Proc, Runtime
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.protocols.torchft.lighthouse import lighthouse_address, lighthouse_main
from elastic_sim.protocols.torchft.rpc import tell
from elastic_sim.protocols.torchft.train import knobs_of

RANK_ENTRY = "elastic_sim.protocols.torchft.train:rank_main"


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """The Lighthouse on the store host, a replica group's launcher everywhere else."""
    knobs = knobs_of(args.get("knobs", {}))
    lighthouse_host = str(args["store_host"])
    if rt.host == lighthouse_host:
        return await lighthouse_main(rt, knobs)
    addr = lighthouse_address(lighthouse_host)
    return await ReplicaLauncher(rt, knobs, args, addr, RANK_ENTRY, addr).run()


RACE_WON_AFTER = 0.5
"""Seconds after rank 0 the other ranks of a start that wins the restart race
(``restart_race_lost``) start: by then rank 0 has written its new Manager address (a
Lighthouse connect and two store writes) unless its own start is slow too."""


class ReplicaLauncher:
    """One replica group's launcher: its store, its ranks (``rank_entry``, told where the
    Lighthouse is: ``lighthouse``), their restarts, and the job's end told to ``job_end``
    (the Lighthouse host's process)."""

    def __init__(self, rt: Runtime, knobs: TorchFTKnobs, args: Mapping[str, Any],
                 lighthouse: str, rank_entry: str, job_end: str) -> None:
        self.rt = rt
        self.knobs = knobs
        self.args = args
        self.lighthouse = lighthouse
        self.rank_entry = rank_entry
        self.job_end = job_end

    async def run(self) -> int:
        """Start the ranks until they succeed or the restarts are spent."""
        rt, knobs = self.rt, self.knobs
        store_address = await rt.host_store(knobs.store_port)
        code = 1
        for attempt in range(knobs.replica_restarts + 1):
            rt.record("ft_replica_start", attempt=attempt, ranks=knobs.ranks_per_replica)
            late = 0.0 if attempt == 0 or self._race_lost() else RACE_WON_AFTER
            procs = [await rt.start_process(f"rank{g}", self.rank_entry, {
                "knobs": dict(self.args.get("knobs", {})),
                "workload": dict(self.args.get("workload", {})),
                "seed": int(self.args.get("seed", 0)), "group_rank": g,
                "start_delay": late if g else 0.0,
                "store_address": store_address, "lighthouse": self.lighthouse,
            }) for g in range(knobs.ranks_per_replica)]
            codes = await self._monitor(procs)
            if all(c == 0 for c in codes):
                code = 0
                break
            rt.record("ft_replica_failed", attempt=attempt, exit_codes=codes)
            await self._stop(procs)
        else:
            rt.record("job_failed", error=f"replica group {rt.host}: its ranks failed "
                      f"{knobs.replica_restarts + 1} times (max_restarts "
                      f"{knobs.replica_restarts})")
        tell(rt, self.job_end, "lh_job_end", {"host": rt.host, "code": code})
        return code

    def _race_lost(self) -> bool:
        """Whether this (re)start's other ranks read the Manager address before its rank 0
        writes the new one (``restart_race_lost``): one draw per start of a group of two
        or more ranks, so its ranks lose or win together."""
        p = self.knobs.restart_race_lost
        if self.knobs.ranks_per_replica < 2 or p >= 1:
            return True
        return p > 0 and self.rt.rng.random() < p

    async def _monitor(self, procs: list[Proc]) -> list[int]:
        """Poll until every rank succeeded or one failed; their exit codes (-1: running)."""

        def idle() -> bool:
            codes = [p.poll() for p in procs]
            return any(c is None for c in codes) and not any(c for c in codes)

        await self.rt.poll(self.knobs.monitor_interval, idle)
        return [-1 if (c := p.poll()) is None else c for p in procs]

    async def _stop(self, procs: list[Proc]) -> None:
        """SIGTERM the ranks still running, SIGKILL what is left after the grace."""
        running = [p for p in procs if p.poll() is None]
        for p in running:
            p.signal("TERM")
        deadline = self.rt.monotonic() + self.knobs.stop_timeout
        while any(p.poll() is None for p in running) and self.rt.monotonic() < deadline:
            await self.rt.sleep(self.knobs.monitor_interval)
        for p in running:
            if p.poll() is None:
                p.signal("KILL")
                await p.wait()
