"""A study run: the method chosen (direct where the whole horizon is affordable to
simulate, else composed), the failure arrivals drawn once per replication and shared by
every setting, each setting run, and the results gathered (:class:`StudyResult`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elastic_sim.errors import ScenarioError
from elastic_sim.study.cache import SampleCache
from elastic_sim.study.compose import compose
from elastic_sim.study.direct import direct_cost, run_direct
from elastic_sim.study.failures import Failure
from elastic_sim.study.load import DIRECT_ONLY, Job, Study
from elastic_sim.study.outcome import SettingResult
from elastic_sim.study.sampling import Sampled, sample_study

AUTO_DIRECT_CPU_S = 120.0
"""``method: auto`` simulates directly when that is estimated to take at most this many
CPU seconds in all (every setting's replications)."""

Progress = Callable[[str, int, int, str], None]
"""``progress(stage, done, total, note)``."""


@dataclass
class StudyResult:
    """Everything a study produced."""

    study: Study
    method: str
    why: str
    """Why this method (the estimate that chose it, or the file's or command line's word)."""
    results: list[SettingResult]
    sampled: Sampled | None = None
    direct_cpu_s: float = 0.0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def choose_method(study: Study, asked: str | None = None) -> tuple[str, str]:
    """The method a study runs with, and why."""
    method = asked or study.spec.method
    runs = study.spec.direct_replications
    estimate = sum(direct_cost(job, study.horizon) for job in study.jobs) * runs
    said = f"direct simulation estimated at {estimate:,.0f} CPU s ({runs} runs of " \
           f"{study.spec.horizon_days:g} days per setting)"
    if method == "direct":
        return "direct", f"asked for; {said}"
    only = sorted({job.protocol for job in study.jobs if job.protocol in DIRECT_ONLY})
    if only:
        if method == "composed":
            raise ScenarioError("--method", "", f"direct or auto: protocol {only[0]} has no "
                                "composed level (a study of it simulates the horizon)")
        return "direct", f"{said}: {', '.join(only)} has no composed level"
    if method == "composed":
        return "composed", f"asked for; {said}"
    if estimate <= AUTO_DIRECT_CPU_S:
        return "direct", f"{said}: within the {AUTO_DIRECT_CPU_S:.0f} s the auto method allows"
    return "composed", f"{said}: over the {AUTO_DIRECT_CPU_S:.0f} s the auto method allows"


def arrivals(study: Study, job: Job, count: int) -> list[list[Failure]]:
    """Replication i's failures: the same for every setting (per host streams), so
    settings are compared under the same failures."""
    return [study.process.arrivals(job.pool, study.horizon, study.causes,
                                   f"{study.spec.seed}/{i}") for i in range(count)]


def run_study(study: Study, method: str | None = None, workers: int = 1,
              ray: str | None = None, cache: SampleCache | None = None,
              replications: int | None = None,
              progress: Progress | None = None) -> StudyResult:
    """Run every setting of ``study`` with the chosen method."""
    started = time.perf_counter()
    chosen, why = choose_method(study, method)
    out = StudyResult(study, chosen, why, [])
    if chosen == "direct":
        count = replications or study.spec.direct_replications
        total = count * len(study.jobs)
        done = 0
        for job in study.jobs:
            res = SettingResult(job.label, job.changes, "direct", [])
            for i, fails in enumerate(arrivals(study, job, count)):
                run, segments = run_direct(job, study.causes, fails, study.horizon,
                                           study.spec.seed + i)
                res.runs.append(run)
                out.direct_cpu_s += sum(s.cpu_s for s in segments)
                done += 1
                if progress:
                    progress("direct", done, total, job.label)
            lost = [r.given_up for r in res.runs]
            if any(lost):
                res.notes.append(
                    f"replica groups given up on healthy hosts (their launchers' restarts "
                    f"spent): {sum(lost) / len(lost):.1f} per run, in {sum(map(bool, lost))} "
                    f"of {len(lost)} runs; each is lost to the job for the rest of its run "
                    f"(check ft_group_recovers: torchft's stale Manager-address race)")
            out.results.append(res)
    else:
        def sampled(done: int, total: int, cached: int) -> None:
            if progress:
                progress("sampling", done, total, f"{cached} from the cache")

        out.sampled = sample_study(study, workers, ray, cache, sampled)
        reps = replications or study.spec.replications
        for k, job in enumerate(study.jobs):
            book = out.sampled.books[job.label]
            runs = compose(job, book, study.causes, arrivals(study, job, reps),
                           study.horizon, study.spec.seed)
            res = SettingResult(job.label, job.changes, "composed", runs)
            if book.growths:
                res.notes.append(f"sampled at {', '.join(map(str, book.sizes))} nodes, "
                                 f"extrapolated to {job.nodes}")
            out.results.append(res)
            if progress:
                progress("composing", k + 1, len(study.jobs), job.label)
    out.wall_s = time.perf_counter() - started
    return out
