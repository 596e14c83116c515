"""Campaigns on Ray: explore's cases, sweep's seeds and compare's runs as Ray tasks.

``--ray`` with no address starts a local Ray; ``--ray ADDRESS`` joins an existing cluster
(``ray://host:10001`` or ``host:6379``). Results come back in submission order, so a
search stays a pure function of its seed (the same findings as local worker processes);
runs' files come back as bytes and are written here, so a remote cluster's nodes need no
shared disk. Results stream back: each is passed on (progress, findings) as soon as it and
those before it are in. A task whose Ray worker is lost is run again (Ray's
``max_retries``). Ray is an optional extra: ``pip install 'elastic-sim[ray]'``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_sim.case_pool import CaseRunner, Search, Spent, Verdict, run_range, shrink_task
from elastic_sim.cases import Case, Signature
from elastic_sim.errors import ScenarioError
from elastic_sim.scenario import Scenario
from elastic_sim.shrinking import Shrunk

if TYPE_CHECKING:
    from elastic_sim.compare.collect import RunFigures

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


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*") if p.is_file()}


def _write_files(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _run_seed(sc: Scenario, seed: int, file: str) -> tuple[Any, dict[str, bytes]]:
    """One sweep run in a scratch directory; the run and its files' bytes."""
    from elastic_sim.sweep import run_seed

    with tempfile.TemporaryDirectory(prefix="elastic-sim-ray-") as tmp:
        run = run_seed(sc, seed, Path(tmp), file)
        return run, _files(run.out_dir)


def _run_mode(sc: Scenario, file: str, mode: str, seed: int,
              torchrun: Any) -> tuple[RunFigures, dict[str, bytes]]:
    """One compare run in a scratch directory; its figures and its files' bytes."""
    from elastic_sim.compare.collect import run_one

    with tempfile.TemporaryDirectory(prefix="elastic-sim-ray-") as tmp:
        fig = run_one(sc, file, mode, seed, Path(tmp) / "run", torchrun)
        return fig, _files(Path(tmp) / "run")


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
        self.shrinks = ray.remote(max_retries=RETRIES)(shrink_task)
        self.ranges = ray.remote(max_retries=RETRIES)(run_range)
        self.seed = ray.remote(max_retries=RETRIES)(_run_seed)
        self.mode = ray.remote(max_retries=RETRIES)(_run_mode)

    def cpus(self) -> int:
        """CPUs the cluster offers (how many tasks run at once)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        """Disconnect (and stop a local Ray)."""
        self.ray.shutdown()


class RayCaseRunner(CaseRunner):
    """explore's cases on Ray, outcomes in case order (drawn ranges are handed out ahead,
    as to local workers: :meth:`CaseRunner.drawn`)."""

    def __init__(self, sc: Scenario, address: str, ignore: Collection[str] = (),
                 search: Search | None = None) -> None:
        self.cluster = RayCluster(address)
        super().__init__(sc, 1, ignore, search)  # no local pool
        self.workers = self.cluster.cpus()
        self._sc = self.cluster.ray.put(sc)
        self._search = self.cluster.ray.put(search)

    def local(self) -> bool:
        """Never: the cases run on Ray."""
        return False

    def submit_range(self, start: int, stop: int) -> Any:
        """The search's cases ``start`` to ``stop - 1`` as one Ray task."""
        return self.cluster.ranges.remote(self._sc, self.ignore, self._search, start, stop)

    def verdicts(self, handle: Any) -> list[Verdict]:
        """A range task's verdicts (waits for it)."""
        result: tuple[list[Verdict], Spent] = self.cluster.ray.get(handle)
        self.busy.search.add(result[1])
        return result[0]

    def submit_shrink(self, case: Case, targets: list[Signature]) -> Any:
        """Shrink ``targets``, violations ``case`` showed, as one Ray task."""
        return self.cluster.shrinks.remote(self._sc, self.ignore, case, targets)

    def ready(self, handle: Any) -> bool:
        """Whether a shrink task has finished."""
        done, _ = self.cluster.ray.wait([handle], timeout=0)
        return bool(done)

    def shrunk(self, handle: Any) -> list[Shrunk]:
        """A shrink task's results (waits for it)."""
        result: tuple[list[Shrunk], Spent] = self.cluster.ray.get(handle)
        self.busy.shrink.add(result[1])
        return result[0]

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
            _write_files(out, files)
            runs.append(type(run)(run.seed, run.passed, out, run.suite))
            if progress:
                progress(runs[-1])
        return runs
    finally:
        cluster.close()


def compare_on_ray(sc: Scenario, file: str, jobs: Sequence[tuple[str, int, Path]],
                   torchrun: Any, address: str,
                   progress: Callable[[str], None] | None = None) -> list[RunFigures]:
    """compare's runs (mode, seed, local run directory) as Ray tasks, their figures in
    ``jobs``' order and their files written to the run directories. The sim runs go at
    once; then the real and torchrun runs, whose recovery times are measured, one at a
    time, so that no other run competes with them for CPUs."""
    from elastic_sim.compare.collect import fresh_run_dir

    cluster = RayCluster(address)
    try:
        sc_ref = cluster.ray.put(sc)
        sims = [i for i, j in enumerate(jobs) if j[0] == "sim"]
        order = sims + [i for i in range(len(jobs)) if i not in sims]
        refs = {i: cluster.mode.remote(sc_ref, file, jobs[i][0], jobs[i][1], torchrun)
                for i in sims}
        figs: dict[int, RunFigures] = {}
        for n, i in enumerate(order):
            mode, seed, run_dir = jobs[i]
            if i not in refs:  # a timed run: started alone, once every other run is back
                refs[i] = cluster.mode.remote(sc_ref, file, mode, seed, torchrun)
            fig, files = cluster.ray.get(refs.pop(i))
            fresh_run_dir(run_dir)
            _write_files(run_dir, files)
            fig.out_dir = str(run_dir)
            figs[i] = fig
            if progress:
                progress(f"{mode} seed {seed} back ({n + 1} of {len(jobs)})")
        return [figs[i] for i in range(len(jobs))]
    finally:
        cluster.close()
