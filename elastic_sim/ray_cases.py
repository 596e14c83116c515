"""Campaigns on Ray: explore's cases and sweep's seeds as Ray tasks.

``--ray`` with no address starts a local Ray; ``--ray ADDRESS`` joins an existing cluster
(``ray://host:10001`` or ``host:6379``). Results come back in submission order, so a
search stays a pure function of its seed (the same findings as local worker processes);
runs' files come back as bytes and are written here, so a remote cluster's nodes need no
shared disk. A task whose Ray worker is lost is run again (Ray's ``max_retries``). Ray is
an optional extra: ``pip install 'elastic-sim[ray]'``.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from elastic_sim.case_pool import CaseRunner, Search
from elastic_sim.errors import ScenarioError
from elastic_sim.explore import Case, Outcome, make_case, run_case
from elastic_sim.scenario import Scenario

LOCAL = "local"
"""The ``--ray`` value that means: start a local Ray."""
RETRIES = 3
"""Times a task is rerun when its worker process or node is lost."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ScenarioError("--ray", "", "Ray is not installed; pip install "
                            "'elastic-sim[ray]'") from None
    return ray


def _run_cases(sc: Scenario, ignore: tuple[str, ...], cases: list[Case]) -> list[Outcome]:
    return [run_case(sc, c, ignore) for c in cases]


def _run_seed(sc: Scenario, seed: int, file: str) -> tuple[Any, dict[str, bytes]]:
    """One sweep run in a scratch directory; the run and its files' bytes."""
    from elastic_sim.sweep import run_seed

    with tempfile.TemporaryDirectory(prefix="elastic-sim-ray-") as tmp:
        run = run_seed(sc, seed, Path(tmp), file)
        files = {p.relative_to(run.out_dir).as_posix(): p.read_bytes()
                 for p in run.out_dir.rglob("*") if p.is_file()}
    return run, files


def _reachable(address: str) -> None:
    """Fail fast (exit 2) when nothing listens at ``host:port`` (Ray itself retries for
    minutes); ``auto`` and addresses without a port are left to Ray."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ScenarioError("--ray", "", f"cannot join the Ray cluster at {address!r}: "
                            f"{exc}") from None


class RayCluster:
    """A Ray connection: started (local) or joined (an address) here, shut down at close."""

    def __init__(self, address: str) -> None:
        ray = _ray()
        self.ray = ray
        if address == LOCAL:
            # Local workers import what this process can: its sys.path (a checkout, the
            # modules a scenario's protocol.entry names).
            env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}}
            ray.init(runtime_env=env, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            _reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            except Exception as exc:  # ConnectionError, a bad address: the user's input
                raise ScenarioError("--ray", "", f"cannot join the Ray cluster at "
                                    f"{address!r}: {exc}") from None
        self.cases = ray.remote(max_retries=RETRIES)(_run_cases)
        self.seed = ray.remote(max_retries=RETRIES)(_run_seed)

    def cpus(self) -> int:
        """CPUs the cluster offers (how many tasks run at once)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        """Disconnect (and stop a local Ray)."""
        self.ray.shutdown()


class RayCaseRunner(CaseRunner):
    """explore's cases on Ray, outcomes in case order."""

    def __init__(self, sc: Scenario, address: str, ignore: Collection[str] = (),
                 search: Search | None = None) -> None:
        self.cluster = RayCluster(address)
        super().__init__(sc, 1, ignore, search)  # no local pool
        self.workers = self.cluster.cpus()
        self._sc = self.cluster.ray.put(sc)

    def run(self, cases: list[Case]) -> list[Outcome]:
        """Outcomes of ``cases``, in order."""
        n = max(1, -(-len(cases) // (self.workers * 2)))
        refs = [self.cluster.cases.remote(self._sc, self.ignore, cases[i:i + n])
                for i in range(0, len(cases), n)]
        return [o for part in self.cluster.ray.get(refs) for o in part]

    def drawn(self, budget: int | None) -> Iterator[Outcome]:
        """Outcomes of the search's cases 0, 1, ... in index order, run on Ray in batches."""
        s = self.search
        if s is None:
            raise ValueError("this runner was made without a search")
        indices = iter(range(budget) if budget is not None else itertools.count())
        while True:
            batch = list(itertools.islice(indices, self.workers * 16))
            if not batch:
                return
            yield from self.run([make_case(s.seed, i, s.space, s.ties, s.varies) for i in batch])

    def close(self) -> None:
        """Disconnect from Ray."""
        self.cluster.close()


def sweep_on_ray(sc: Scenario, seeds: Sequence[int], out_root: Path, address: str,
                 file: str, progress: Any = None) -> list[Any]:
    """Every seed as a Ray task; each run's files written under ``out_root``; the runs in
    seed order (``progress`` is called as each one arrives, in seed order)."""
    cluster = RayCluster(address)
    try:
        sc_ref = cluster.ray.put(sc)
        refs = [cluster.seed.remote(sc_ref, seed, file) for seed in seeds]
        runs = []
        for ref in refs:
            run, files = cluster.ray.get(ref)
            out = out_root / run.out_dir.name
            for rel, data in files.items():
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / rel).write_bytes(data)
            runs.append(type(run)(run.seed, run.passed, out, run.suite))
            if progress:
                progress(runs[-1])
        return runs
    finally:
        cluster.close()
