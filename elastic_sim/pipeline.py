"""One run, the same for every backend: record the trace -> judge it once (checks, metrics,
expectations, contract) -> write it (summary.json, reports).

A spec (:mod:`elastic_sim.spec`) was refused or accepted when it was compiled; here its
backend runs it. :func:`execute` does all three stages into a run directory;
:func:`record` and :func:`judge` are the stages for loops that keep runs in memory
(explore's cases, property tests); :func:`simulate` is a sim run of a scenario in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.backends.base import Progress
from elastic_sim.checks import CheckResult, run_checks
from elastic_sim.checks.bounded import GUARDS
from elastic_sim.checks.contracts import ContractVerdict
from elastic_sim.checks.contracts import judge as judge_contract
from elastic_sim.errors import ScenarioError
from elastic_sim.expect import ExpectationResult, evaluate
from elastic_sim.faults.model import Fault
from elastic_sim.guards import RunGuard
from elastic_sim.history import History
from elastic_sim.reports.metrics import Metrics, compute, outcome_of
from elastic_sim.scenario import Scenario, scenario_dict
from elastic_sim.spec import RunSpec, compile_spec
from elastic_sim.trace import TraceEvent, TraceWriter, encode
from elastic_sim.world import RunResult, World

RUNNER = "elastic-sim"
"""The ``proc`` of the pipeline's own events (``run_start``, ``run_end``)."""


@dataclass
class Recording:
    """What a run left: its events (as a :class:`History`), the backend's result and, when
    asked for, the metrics worked out of them."""

    events: History
    result: RunResult
    metrics: Metrics | None
    wall_s: float
    cpu_s: float = 0.0
    """The process's CPU seconds in the backend's run alone (the simulation, for the sim):
    steadier than ``wall_s`` on a loaded machine."""


@dataclass
class RunReport:
    """Everything one run produced, judged."""

    spec: RunSpec
    out_dir: Path
    result: RunResult
    metrics: Metrics
    checks: list[CheckResult]
    expectations: list[ExpectationResult]
    wall_s: float
    events: Sequence[TraceEvent] = field(repr=False, default_factory=list)
    cpu_s: float = 0.0
    """CPU seconds of the backend's run alone (:attr:`Recording.cpu_s`)."""
    contract: ContractVerdict | None = None
    """How the run stands against its protocol's contract."""
    report_files: list[Path] = field(default_factory=list)
    """report.html first, then plots and trace.perfetto.json (empty with --no-report)."""
    report_error: str | None = None
    """Why the reports could not be written (the verdict stands: trace and summary are)."""

    @property
    def scenario(self) -> Scenario:
        """The scenario run."""
        return self.spec.scenario

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.spec.seed

    @property
    def mode(self) -> str:
        """The backend that ran it."""
        return self.spec.mode

    @property
    def passed(self) -> bool:
        """All checks and expectations hold."""
        known = set(self.scenario.expect.known_violations())
        return (all(c.ok or c.name in known for c in self.checks)
                and all(e.ok for e in self.expectations))

    @property
    def exit_code(self) -> int:
        """0 when everything holds, 1 otherwise."""
        return 0 if self.passed else 1


# -- record ------------------------------------------------------------------------------

def record(spec: RunSpec, *, trace: Path | None = None, guard: RunGuard | None = None,
           progress: Progress | None = None, workdir: Path | None = None,
           metrics_wanted: bool = True) -> Recording:
    """Run ``spec`` on its backend and keep every event, writing them to ``trace`` as they
    come (none: in memory only, neither encoded nor hashed). The pipeline's ``run_start``
    opens the trace and its ``run_end``, with the outcome, closes it; the metrics are
    worked out between (``metrics_wanted``; else only the outcome). ``workdir`` holds what
    a real backend's processes write (default: a temporary folder)."""
    events: list[TraceEvent] = []
    guard = guard or RunGuard()  # a given one's clock runs from when its caller began
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        writer = None
        emit: Callable[[TraceEvent], None] = events.append
        if trace is not None:
            writer = TraceWriter(stack.enter_context(trace.open("w", encoding="utf-8")))
            emit = _tee(events, writer)
        if workdir is None:
            workdir = (Path(os.devnull) if spec.backend.deterministic else
                       Path(stack.enter_context(tempfile.TemporaryDirectory(
                           prefix="elastic-sim-"))))
        knobs = dict(spec.world.args["knobs"])
        start: dict[str, Any] = {"scenario": spec.scenario.name, "seed": spec.seed,
                                 "mode": spec.mode, "protocol": spec.scenario.protocol.name,
                                 "knobs": knobs,
                                 "coordinator": knobs.get("driver_host")
                                 or spec.scenario.store_host}
        if spec.tie_seed is not None:
            start["tie_seed"] = spec.tie_seed
        emit(TraceEvent(0.0, "*", RUNNER, "run_start", start))
        guard.begin_run()
        cpu = time.process_time()
        result = spec.backend.run(spec, emit, guard, workdir, progress)
        cpu = time.process_time() - cpu
        steps = spec.backend.steps(spec, events)
        # The outcome as the metrics work it out, so the history is read once, whole.
        outcome = outcome_of([ev for ev in events if ev.kind == "job_done"], steps,
                             result.hung)
        end: dict[str, Any] = {"outcome": outcome,
                               "exit_codes": dict(sorted(result.exit_codes.items()))}
        if result.stopped:
            end["stopped"] = result.stopped
        emit(TraceEvent(result.end_time, "*", RUNNER, "run_end", end))
        hist = History(events)
        metrics = compute(hist, steps, result.exit_codes, result.hung, result.end_time,
                          spec.scenario.workload.batch_size) if metrics_wanted else None
        result.trace_sha256 = writer.sha256 if writer else ""
        result.trace_events = writer.count if writer else hist.size
    return Recording(hist, result, metrics, time.perf_counter() - started, cpu)


def _tee(events: list[TraceEvent], writer: TraceWriter) -> Callable[[TraceEvent], None]:
    keep, write = events.append, writer.write

    def emit(ev: TraceEvent) -> None:
        keep(ev)
        write(ev)

    return emit


# -- judge -------------------------------------------------------------------------------

def judge(spec: RunSpec, rec: Recording, guard: RunGuard | None = None
          ) -> tuple[list[CheckResult], list[ExpectationResult], ContractVerdict | None]:
    """Every check, the scenario's expectations and the contract's standing, once. Checks
    the backend's events cannot judge say why instead of passing; so do checks of a run
    that ``guard`` stopped that did not fit in its time to wrap up."""
    assert rec.metrics is not None, "judging needs the run's metrics"
    left = guard.wrap_up_left() if guard is not None and rec.result.stopped in GUARDS else None
    checks = run_checks(rec.events) if left is None else _checks_within(rec.events, left)
    why = spec.backend.not_judged(spec, rec.events)
    for c in checks:
        if c.name in why:
            c.not_judged, c.violations, c.checked = why[c.name], [], 0
    expectations = evaluate(spec.scenario.expect, rec.metrics, rec.events, why, checks)
    return checks, expectations, judge_contract(rec.events, checks)


def _checks_within(events: Sequence[TraceEvent], seconds: float) -> list[CheckResult]:
    """The checks that fit in ``seconds`` (about, less what the summary needs), each as
    :func:`run_checks` runs it; the others not judged, saying why."""
    from elastic_sim.checks import CHECKS, MAX_VIOLATIONS
    from elastic_sim.checks.bounded import time_advances, within_run_guards
    from elastic_sim.checks.incarnations import incarnation_rounds

    deadline = time.monotonic() + seconds * 0.8  # the summary still has to be written
    hist = incarnation_rounds(events)
    first = (within_run_guards, time_advances)  # why the run stopped: judged whatever
    done: dict[str, CheckResult] = {}
    for check in (*first, *(c for c in CHECKS if c not in first)):
        if check not in first and time.monotonic() > deadline:
            done[check.__name__] = CheckResult(
                check.__name__, (check.__doc__ or "").strip().split("\n")[0],
                not_judged="the run was stopped by a guard of the tool, and its wall limit "
                "left no time to judge this check")
            continue
        res = check(hist)
        res.violations = res.violations[:MAX_VIOLATIONS]
        done[check.__name__] = res
    return [done[c.__name__] for c in CHECKS]


# -- the whole run -----------------------------------------------------------------------

def execute(spec: RunSpec, out_dir: Path, *, write_report: bool = False,
            guard: RunGuard | None = None, progress: Progress | None = None) -> RunReport:
    """Run ``spec`` into ``out_dir``: ``trace.jsonl``, ``summary.json`` and, with
    ``write_report``, the reports (report.html, plots, Perfetto trace). Files are written
    under temporary names and renamed when complete: a run that fails midway leaves no
    half-written results. ``guard`` (default: :class:`RunGuard`'s defaults) ends a run
    past its wall-clock or memory limit, keeping its trace."""
    writable(out_dir)
    part = out_dir / "trace.jsonl.part"
    try:
        rec = record(spec, trace=part, guard=guard, progress=progress, workdir=out_dir)
    except BaseException:
        part.unlink(missing_ok=True)  # nothing half-written
        raise
    part.replace(out_dir / "trace.jsonl")
    checks, expectations, contract = judge(spec, rec, guard)
    assert rec.metrics is not None
    report = RunReport(spec=spec, out_dir=out_dir, result=rec.result, metrics=rec.metrics,
                       checks=checks, expectations=expectations, wall_s=rec.wall_s,
                       events=rec.events, contract=contract, cpu_s=rec.cpu_s)
    summary = summary_json(report)
    write_json(out_dir / "summary.json", summary)
    if write_report and rec.result.stopped in GUARDS:  # the run was too big already
        report.report_error = (f"the run was stopped by its {rec.result.stopped} guard; "
                               "its trace and summary are written")
    elif write_report:
        from elastic_sim.reports.render import write_reports

        try:
            report.report_files = write_reports(out_dir, rec.events, summary, report.metrics)
        except Exception as exc:  # derived files: a full disk must not turn PASS into exit 2
            report.report_error = f"{type(exc).__name__}: {exc}"
    return report


def writable(out_dir: Path) -> None:
    """Create ``out_dir`` and make sure files can be written there, before anything runs:
    an unwritable ``--out`` is bad input (exit 2), not a failure after the run."""
    probe = out_dir / f".write-test.{os.getpid()}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ScenarioError("--out", str(out_dir),
                            f"cannot write there ({exc.strerror or exc}); expected a "
                            "writable directory") from None


# -- in memory, in the sim ---------------------------------------------------------------

def simulate(sc: Scenario, seed: int, tie_seed: int | None = None,
             guard: RunGuard | None = None, *, faults: list[Fault] | None = None,
             world: World | None = None) -> tuple[History, Metrics, RunResult]:
    """One sim run of ``sc`` held in memory, writing no files: the events, metrics and
    result :func:`execute` would give. ``tie_seed`` (default: the scenario's) orders
    same-time events of different sources pseudo-randomly (:mod:`elastic_sim.sim.kernel`);
    ``faults`` (default: the scenario's) and ``world`` (default: built from ``sc`` and
    ``seed``) spare a loop of runs of one scenario rebuilding them per run."""
    rec = record(_sim_spec(sc, seed, tie_seed, faults, world), guard=guard)
    assert rec.metrics is not None
    return rec.events, rec.metrics, rec.result


def _sim_spec(sc: Scenario, seed: int, tie_seed: int | None, faults: list[Fault] | None,
              world: World | None) -> RunSpec:
    if world is None:
        return compile_spec(sc, seed=seed, tie_seed=tie_seed, faults=faults)
    from elastic_sim.backends import backend

    return RunSpec(sc, seed, backend("sim"),
                   tuple(sc.fault_objects() if faults is None else faults), world,
                   tie_seed=sc.tie_seed if tie_seed is None else tie_seed)


# -- write -------------------------------------------------------------------------------

def summary_json(r: RunReport) -> dict[str, Any]:
    """The machine-readable summary of a run."""
    return {
        "scenario": scenario_dict(r.scenario),
        "seed": r.seed,
        "mode": r.mode,
        "verdict": _verdict(r),
        "exit_code": r.exit_code,
        "trace": {"file": "trace.jsonl", "sha256": r.result.trace_sha256,
                  "events": r.result.trace_events},
        "wall_s": round(r.wall_s, 3),
        "cpu_s": round(r.cpu_s, 3),
        "hung": r.result.hung,
        "stopped": r.result.stopped or None,
        "exit_codes": dict(sorted(r.result.exit_codes.items())),
        "faults": [asdict(f) for f in r.result.faults],
        "metrics": r.metrics.to_json(),
        "checks": [
            {
                "name": c.name,
                "description": c.description,
                "ok": c.ok,
                "status": c.status,
                "checked": c.checked,
                "examined": c.examined,
                **({"standing": r.contract.standing[c.name]} if r.contract else {}),
                **({"not_judged": c.not_judged} if c.not_judged else {}),
                "violations": [
                    {"message": v.message, "witness": [json.loads(encode(e)) for e in v.witness]}
                    for v in c.violations
                ],
            }
            for c in r.checks
        ],
        "expectations": [asdict(e) for e in r.expectations],
        **({"contract": contract_json(r.contract)} if r.contract else {}),
    }


def contract_json(v: ContractVerdict) -> dict[str, Any]:
    """The run's standing against its protocol's contract, for summary.json."""
    return {
        "protocol": v.contract.protocol,
        "assumptions": list(v.contract.assumptions),
        "broken_assumptions": v.broken_assumptions,
        "broken_promises": v.names("broken_promise"),
        "weak_spots": {n: v.contract.weak_spots[n] for n in v.names("weak_spot")},
        "outside_contract": v.names("outside_contract"),
    }


def _verdict(r: RunReport) -> str:
    """``pass``, ``fail``, or ``stopped`` for a run a guard of the tool ended (its trace
    is what happened until then)."""
    if r.result.stopped in GUARDS:
        return "stopped"
    return "pass" if r.passed else "fail"


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON, written whole (a temporary name, then renamed)."""
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
