"""``elastic-sim explore``: search fault schedules around a scenario, shrink each distinct
violation to a minimal schedule, and write it as a reproducer scenario with its report.

A search is a pure function of (scenario, search seed, number of cases): case ``i`` runs the
schedule drawn from the stream ``<seed>/schedule/<i>`` with the sim seed drawn from
``<seed>/sim/<i>`` (and, with ``ties``, the tie seed that orders same-time events from
``<seed>/ties/<i>``), so adding workers changes the speed, never the findings. Violations are
told apart by their :class:`~elastic_sim.cases.Signature` (which check failed, and on which
kinds of events; a case and its run: :mod:`elastic_sim.cases`);
only the first case showing a signature is shrunk (:mod:`elastic_sim.shrinking`), as a
task of its own while the search goes on; findings are taken in the order the search met
them, whatever order the shrinks finish in. Only the checks judge a case: the
scenario's expectations were written for its own schedule, not for generated ones.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.case_pool import CaseRunner, Search
from elastic_sim.cases import Case, Outcome, Signature, case_run, make_case, run_case, signatures_of
from elastic_sim.checks.contracts import contract_for
from elastic_sim.faults.model import DISCOVERY_FAULTS, FAULT_TYPES, Fault
from elastic_sim.faults.record import INJECTOR
from elastic_sim.faults.schedule import DEFAULT_TYPES, FaultSpace
from elastic_sim.faults.triggers import EventTrigger
from elastic_sim.outdir import safe_component
from elastic_sim.pipeline import execute, simulate
from elastic_sim.scenario import Scenario, fault_dict, with_faults
from elastic_sim.shrinking import Shrunk
from elastic_sim.trace import TraceEvent
from elastic_sim.variation import Variation, Vary, apply_variation

__all__ = [
    "Case",
    "Exploration",
    "Finding",
    "Outcome",
    "Signature",
    "case_run",
    "event_triggers",
    "exploration_json",
    "explore",
    "known_violations",
    "make_case",
    "protocol_fault_types",
    "run_case",
    "signatures_of",
    "space_for",
    "write_reproducer",
    "write_summary",
]

RUNNER = "elastic-sim"
"""The ``proc`` of the runner's own events (run start and end)."""
TRIGGER_LIMIT = 48
"""Most event triggers a space offers (spread over the fault-free run)."""


@dataclass
class Finding:
    """One distinct violation: where the search met it and its shrunk reproducer."""

    signature: Signature
    message: str
    found_at: int
    original: tuple[Fault, ...]
    faults: tuple[Fault, ...]
    seed: int
    shrink_runs: int
    tie_seed: int | None = None
    variation: Variation = ()
    reproducer: Path | None = None
    run_dir: Path | None = None
    trace_sha256: str = ""
    reproduced: bool = False
    standing: str = "broken_promise"
    """Against the protocol's contract: broken_promise, weak_spot (upstream's known weak
    spot) or outside_contract (the schedule broke a fault assumption of the contract)."""
    reported: bool = False
    """False for a mechanism that shrank into one already reported."""


@dataclass
class Exploration:
    """The result of a search."""

    scenario: str
    seed: int
    space: FaultSpace
    cases: int = 0
    wall_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    ignored: tuple[str, ...] = ()
    """Checks not reported (known violations)."""
    shrink_runs: int = 0
    """Runs spent shrinking (on top of ``cases``)."""
    workers: int = 1
    search_s: float = 0.0
    """Seconds the workers spent running the search's cases (all workers together)."""
    shrink_s: float = 0.0
    """Seconds the workers spent shrinking (all workers together)."""
    cpu_s: float = 0.0
    """CPU seconds the workers' processes spent on cases and shrinks (below
    ``search_s + shrink_s`` where other processes took the CPU)."""
    stopped: bool = False
    """The search was interrupted (Ctrl-C, SIGTERM) before its budget or time was spent."""

    def failing(self, fail_on: str = "promise") -> list[Finding]:
        """The findings that fail the campaign: those where the protocol broke its own
        promise (``promise``), or all of them (``any``)."""
        return [f for f in self.findings if fail_on == "any" or f.standing == "broken_promise"]

    @property
    def per_minute(self) -> float:
        """New schedules explored per minute of wall time (the wall time includes
        shrinking: a shrink run is not a new schedule)."""
        return 60.0 * self.cases / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def runs_per_minute(self) -> float:
        """Simulated runs per minute of wall time: new schedules and shrink runs."""
        runs = self.cases + self.shrink_runs
        return 60.0 * runs / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def idle_s(self) -> float:
        """Worker-seconds not spent running cases: starting, waiting for a task, or (with
        one worker) this process's own bookkeeping."""
        return max(0.0, self.workers * self.wall_s - self.search_s - self.shrink_s)


def known_violations(sc: Scenario) -> tuple[str, ...]:
    """Checks the scenario says the modelled system breaks anyway (upstream's own bugs):
    a search does not report them again."""
    return sc.expect.known_violations()


def protocol_fault_types(sc: Scenario) -> tuple[str, ...]:
    """Every fault type the scenario's protocol can meet: all of them, less the
    discovery-source faults where it has no discovery source."""
    discovery = {c.scenario_type for c in DISCOVERY_FAULTS}
    has_source = sc.protocol_info().discovery
    return tuple(t for t in FAULT_TYPES if has_source or t not in discovery)


def event_triggers(events: Sequence[TraceEvent], horizon: float,
                   limit: int = TRIGGER_LIMIT) -> tuple[EventTrigger, ...]:
    """Triggers at the protocol events of a fault-free run up to ``horizon``: each
    (kind, host, round/step/epoch) once, at most ``limit`` spread over the run."""
    seen: dict[EventTrigger, None] = {}
    for e in events:
        if e.t > horizon or e.host == "*" or e.proc in (RUNNER, INJECTOR):
            continue
        key = next(((k, e.data[k]) for k in ("round", "step", "epoch")
                    if isinstance(e.data.get(k), int) and not isinstance(e.data[k], bool)),
                   None)
        seen.setdefault(EventTrigger(e.kind, e.host, (key,) if key else ()), None)
    found = list(seen)
    if len(found) > limit:
        found = [found[i * len(found) // limit] for i in range(limit)]
    return tuple(found)


def space_for(sc: Scenario, *, types: Sequence[str] = DEFAULT_TYPES, max_faults: int = 3,
              max_duration: float = 60.0, spare: Sequence[str] = (),
              horizon: float | None = None, max_crashes: int | None = None,
              triggers: bool = False) -> FaultSpace:
    """The schedules around ``sc``: its hosts, faults within its fault-free run time (with
    ``triggers``, also at that run's protocol events)."""
    events: Sequence[TraceEvent] = []
    if horizon is None or triggers:
        events, _, base = simulate(with_faults(sc, [], seed=sc.seed, name=sc.name), sc.seed)
        if horizon is None:
            horizon = base.end_time
    return FaultSpace(
        hosts=tuple(h.name for h in sc.cluster.host_specs()),
        horizon=round(horizon, 3),
        types=tuple(types),
        max_faults=max_faults,
        max_duration=max_duration,
        spare=tuple(spare),
        max_crashes=max_crashes,
        store_host=sc.store_host,
        triggers=event_triggers(events, horizon) if triggers else (),
    )


# -- the search -------------------------------------------------------------------------

Progress = Callable[[int, int], None]
"""Called with (cases done, distinct violations so far)."""
FAIL_ON = ("promise", "any")
"""What fails a campaign: a finding where the protocol broke its own promise, or any."""


def explore(
    sc: Scenario,
    space: FaultSpace,
    *,
    seed: int = 0,
    budget: int | None = None,
    time_s: float | None = None,
    workers: int = 1,
    out_dir: Path | None = None,
    progress: Progress | None = None,
    ignore: Collection[str] | None = None,
    ties: bool = False,
    varies: Sequence[Vary] = (),
    ray: str | None = None,
) -> Exploration:
    """Run up to ``budget`` cases (or for ``time_s`` seconds); shrink each new violation and,
    with ``out_dir``, write its reproducer ``<out_dir>/<name>.yaml`` and its run
    ``<out_dir>/<name>/`` (trace, summary, report). Checks in ``ignore`` (default: the
    scenario's known violations) are not reported. With ``ties`` every case also draws a
    tie seed (the order of same-time events), kept in its reproducer. With ``ray`` (an
    address, or ``"local"``) the cases run as Ray tasks; the findings are the same."""
    if budget is None and time_s is None:
        raise ValueError("explore needs a budget or a time limit")
    res = Exploration(sc.name, seed, space)
    res.ignored = tuple(known_violations(sc) if ignore is None else ignore)
    search = Search(sc, res.ignored, seed, space, ties, tuple(varies))
    runner = CaseRunner(search, workers, ray)
    workers = runner.workers
    res.workers = workers
    started = time.perf_counter()
    seen: set[Signature] = set()
    reported: set[Signature] = set()
    shrinking: deque[tuple[Outcome, list[Signature], Any]] = deque()

    def take(wait: bool) -> None:
        """Findings of the shrinks handed out, in the order the search met them."""
        while shrinking and (wait or runner.ready(shrinking[0][2])):
            out, sigs, handle = shrinking.popleft()
            for sig, shrunk in zip(sigs, runner.shrunk(handle), strict=True):
                finding = _finding(sc, out, sig, shrunk, out_dir, len(res.findings), reported)
                res.shrink_runs += finding.shrink_runs
                if finding.reported:
                    found(finding)

    def found(finding: Finding) -> None:
        res.findings.append(finding)
        res.wall_s = time.perf_counter() - started
        if out_dir is not None:  # written as findings arrive: a stopped search keeps them
            write_summary(res, out_dir / "explore.json")

    try:
        for out in runner.drawn(budget):
            if time_s is not None and time.perf_counter() - started >= time_s:
                break
            res.cases += 1
            new = [sig for sig in out.signatures if sig not in seen]
            if new:
                seen.update(new)
                shrinking.append((out, new, runner.submit_shrink(out.case, new)))
            take(wait=False)
            if progress:
                progress(res.cases, len(res.findings))
        take(wait=True)
        if progress:
            progress(res.cases, len(res.findings))
    except BaseException:
        res.stopped = True  # Ctrl-C, SIGTERM: what was found so far is still written
        raise
    finally:
        runner.close()
        res.wall_s = time.perf_counter() - started
        busy = runner.busy
        res.search_s, res.shrink_s = busy.search.wall_s, busy.shrink.wall_s
        res.cpu_s = busy.search.cpu_s + busy.shrink.cpu_s
        if out_dir is not None:
            write_summary(res, out_dir / "explore.json")
    return res


def _finding(sc: Scenario, out: Outcome, sig: Signature, shrunk: Shrunk,
             out_dir: Path | None, n: int, reported: set[Signature]) -> Finding:
    """One shrunk mechanism; reported, and its reproducer written, unless it shrank into
    one already reported (a duplicate)."""
    small, shown = shrunk.case, shrunk.signature
    finding = Finding(shown, out.messages[sig], out.case.index, out.case.faults,
                      small.faults, small.seed, shrunk.runs, small.tie_seed, small.variation)
    contract = contract_for(sc.protocol.name) if sc.protocol.name else None
    if contract is not None and shown.check in contract.weak_spots:
        finding.standing = "weak_spot"
    if shown in reported:
        return finding
    reported.add(shown)
    finding.reported = True
    if out_dir is not None:
        write_reproducer(sc, finding, out_dir, safe_component(f"{sc.name}-{sig.check}-{n}"))
    return finding


def write_reproducer(sc: Scenario, finding: Finding, out_dir: Path, name: str) -> None:
    """Write the finding as a scenario file, run it (with its report) and note whether it
    shows the same violation."""
    import yaml

    from elastic_sim.scenario import scenario_dict
    from elastic_sim.spec import compile_spec

    desc = (f"Found by elastic-sim explore of {sc.name}: {finding.signature} - "
            f"{finding.message}. Shrunk from {len(finding.original)} to "
            f"{len(finding.faults)} faults.")
    if finding.variation:
        desc += " Varied: " + ", ".join(f"{p}={v}" for p, v in finding.variation) + "."
    repro = with_faults(apply_variation(sc, finding.variation), list(finding.faults),
                        seed=finding.seed, name=name, description=desc,
                        tie_seed=finding.tie_seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario_dict(repro), sort_keys=False), encoding="utf-8")
    report = execute(compile_spec(path), out_dir / name,  # run what a user would run
                     write_report=True)
    finding.reproducer, finding.run_dir = path, out_dir / name
    finding.trace_sha256 = report.result.trace_sha256
    finding.reproduced = finding.signature in signatures_of(report.checks, (), report.events)
    if report.contract is not None:
        finding.standing = report.contract.standing.get(finding.signature.check,
                                                        finding.standing)


def exploration_json(res: Exploration) -> dict[str, Any]:
    """The machine-readable result of a search."""
    return {
        "scenario": res.scenario,
        "seed": res.seed,
        "cases": res.cases,
        "stopped": res.stopped,
        "wall_s": round(res.wall_s, 3),
        "schedules_per_minute": round(res.per_minute, 1),
        "shrink_runs": res.shrink_runs,
        "runs_per_minute": round(res.runs_per_minute, 1),
        "workers": res.workers,
        "worker_seconds": {"search": round(res.search_s, 3), "shrink": round(res.shrink_s, 3),
                           "idle": round(res.idle_s, 3), "cpu": round(res.cpu_s, 3)},
        "ignored_checks": list(res.ignored),
        "space": {"hosts": list(res.space.hosts), "horizon": res.space.horizon,
                  "types": list(res.space.types), "max_faults": res.space.max_faults,
                  "max_duration": res.space.max_duration, "spare": list(res.space.spare),
                  "max_crashes": res.space.max_crashes,
                  "triggers": [t.describe() for t in res.space.triggers]},
        "violations": [
            {
                "check": f.signature.check,
                "where": f.signature.where,
                "mechanism": str(f.signature),
                "message": f.message,
                "found_at_case": f.found_at,
                "original_faults": [fault_dict(x) for x in f.original],
                "faults": [fault_dict(x) for x in f.faults],
                "seed": f.seed,
                **({"tie_seed": f.tie_seed} if f.tie_seed is not None else {}),
                **({"variation": dict(f.variation)} if f.variation else {}),
                "shrink_runs": f.shrink_runs,
                "reproducer": str(f.reproducer) if f.reproducer else None,
                "run_dir": str(f.run_dir) if f.run_dir else None,
                "trace_sha256": f.trace_sha256,
                "reproduced": f.reproduced,
                "standing": f.standing,
            }
            for f in res.findings
        ],
    }


def write_summary(res: Exploration, path: Path) -> None:
    """Write :func:`exploration_json` to ``path`` whole (a temporary name, then renamed:
    a search stopped while writing leaves the previous version)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(exploration_json(res), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
