"""One run: scenario -> runtime -> trace -> checks, metrics, expectations -> summary."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from elastic_sim.checks import CheckResult, run_checks
from elastic_sim.checks.bounded import GUARDS
from elastic_sim.checks.contracts import ContractVerdict, judge
from elastic_sim.errors import ScenarioError
from elastic_sim.expect import ExpectationResult, evaluate
from elastic_sim.faults.model import Fault
from elastic_sim.guards import RunGuard, watchdog
from elastic_sim.history import History
from elastic_sim.reports.metrics import Metrics, compute, outcome_of
from elastic_sim.scenario import Scenario, scenario_dict, workload_dict
from elastic_sim.trace import TraceEvent, TraceWriter, encode
from elastic_sim.world import NCCL, CollectiveModel, RunResult, World

if TYPE_CHECKING:
    from elastic_sim.real.cluster.launchers import LaunchOptions

if TYPE_CHECKING:
    from elastic_sim.real.torchrun import Options as TorchrunOptions

Mode = Literal["sim", "real", "torchrun"]


@dataclass
class RunReport:
    """Everything one run produced."""

    scenario: Scenario
    seed: int
    mode: Mode
    out_dir: Path
    result: RunResult
    metrics: Metrics
    checks: list[CheckResult]
    expectations: list[ExpectationResult]
    wall_s: float
    events: Sequence[TraceEvent] = field(repr=False, default_factory=list)
    contract: ContractVerdict | None = None
    """How the run stands against its protocol's contract."""
    report_files: list[Path] = field(default_factory=list)
    """report.html first, then plots and trace.perfetto.json (empty with --no-report)."""
    report_error: str | None = None
    """Why the reports could not be written (the verdict stands: trace and summary are)."""

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


def build_world(sc: Scenario, seed: int, mode: Mode) -> World:
    """The runtime's view of the scenario. Real mode picks a free store port."""
    knobs = sc.knobs()
    if mode != "sim" and "store_port" in knobs:
        knobs["store_port"] = _free_port()
    hosts = tuple(sc.cluster.host_specs())
    return World(
        hosts=hosts,
        entry=sc.protocol_info().entry,
        args={
            "hosts": [h.name for h in hosts],
            "store_host": sc.store_host,
            "knobs": knobs,
            "workload": workload_dict(sc),
            "seed": seed,
        },
        topology=sc.cluster.topology,
        latency=sc.cluster.latency,
        bandwidth=sc.cluster.bandwidth,
        links=sc.links(),
        process_start=sc.cluster.process_start,
        wake_latency=sc.cluster.wake_latency,
        process_exit=sc.cluster.process_exit,
        time_limit=sc.time_limit,
        fidelity=sc.fidelity,
        device=sc.cluster.device,
        collectives=NCCL if sc.cluster.device == "cuda" else CollectiveModel(),
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def refuse_unsupported(sc: Scenario, faults: list[Fault], mode: Mode, file: str) -> None:
    """Real mode cannot fake what it cannot do: refuse before anything starts, naming the
    scenario's fault entry (a failure-rate model or a replayed trace by the entry that
    expands into the fault)."""
    if mode == "sim":
        return
    if mode == "torchrun":
        from elastic_sim.real.torchrun import refusal

        bad = refusal(sc.protocol.label, sc.knobs())
        if bad is not None:
            raise ScenarioError(file, bad[0], f"{bad[1]}; run with --mode sim")
        for i, h in enumerate(sc.cluster.host_specs()):
            if h.start_delay > 0:
                raise ScenarioError(file, f"cluster.hosts[{i}].start_delay",
                                    "torchrun mode starts workers through upstream's agent, "
                                    "which cannot delay their start; run with --mode real "
                                    "or --mode sim")
    from elastic_sim.real.faults.injector import why_unsupported

    for f in faults:
        why = why_unsupported(f)
        if why:
            raise ScenarioError(file, _entry_path(sc, f),
                                f"fault {f.id!r} ({f.type}): {why}; run with --mode sim")


def _entry_path(sc: Scenario, f: Fault) -> str:
    """``faults[i]`` of the scenario entry that gave fault ``f``."""
    ids = [m.id or f"f{i}-{m.type}" for i, m in enumerate(sc.faults)]
    if f.id in ids:
        return f"faults[{ids.index(f.id)}]"
    expanded = [i for i, fid in enumerate(ids) if f.id.startswith(fid + "-")]
    return f"faults[{expanded[0]}]" if expanded else "faults"


def run_scenario(
    sc: Scenario,
    *,
    seed: int,
    mode: Mode,
    out_dir: Path,
    file: str = "<scenario>",
    progress: Callable[[str], None] | None = None,
    write_report: bool = False,
    launch: LaunchOptions | None = None,
    guard: RunGuard | None = None,
    torchrun: TorchrunOptions | None = None,
) -> RunReport:
    """Run one scenario and write ``trace.jsonl`` and ``summary.json`` into ``out_dir``,
    and with ``write_report`` the reports (report.html, plots, Perfetto trace): the CLI
    asks for them, loops over many runs (explore) need not pay for them. ``torchrun``:
    options of ``--mode torchrun`` (the user's script).

    Files are written under temporary names and renamed when complete, so a run that
    fails midway leaves no half-written results. ``guard`` (default: :class:`RunGuard`'s
    defaults) ends a run past its wall-clock or memory limit, keeping its trace."""
    faults = sc.fault_objects()
    refuse_unsupported(sc, faults, mode, file)
    world = build_world(sc, seed, mode)
    _writable(out_dir)
    events: list[TraceEvent] = []
    part = out_dir / "trace.jsonl.part"
    started = time.perf_counter()
    try:
        metrics, result, hist = _record(sc, world, faults, seed, mode, out_dir, part, events,
                                        progress, sc.tie_seed if mode == "sim" else None,
                                        guard or RunGuard(), launch, torchrun)
    except BaseException:
        part.unlink(missing_ok=True)  # nothing half-written
        raise
    assert metrics is not None
    part.replace(out_dir / "trace.jsonl")
    wall = time.perf_counter() - started
    checks = run_checks(hist)
    why: dict[str, str] = {}
    if mode == "torchrun":
        from elastic_sim.real.torchrun import Options, not_judged

        why = not_judged(torchrun or Options())
        _mark_not_judged(checks, why)
    report = RunReport(
        scenario=sc, seed=seed, mode=mode, out_dir=out_dir, result=result, metrics=metrics,
        checks=checks, expectations=evaluate(sc.expect, metrics, hist, why, checks),
        wall_s=wall, events=hist, contract=judge(hist, checks),
    )
    summary = summary_json(report)
    _write_json(out_dir / "summary.json", summary)
    if write_report:
        from elastic_sim.reports.render import write_reports

        try:
            report.report_files = write_reports(out_dir, hist, summary)
        except Exception as exc:  # derived files: a full disk must not turn PASS into exit 2
            report.report_error = f"{type(exc).__name__}: {exc}"
    return report


def _writable(out_dir: Path) -> None:
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


def _mark_not_judged(checks: list[CheckResult], why: dict[str, str]) -> None:
    """Checks the run's events cannot judge say so (with why) instead of passing."""
    for c in checks:
        if c.name in why:
            c.not_judged, c.violations, c.checked = why[c.name], [], 0


def simulate(sc: Scenario, seed: int, tie_seed: int | None = None,
             guard: RunGuard | None = None, *, faults: list[Fault] | None = None,
             world: World | None = None) -> tuple[History, Metrics, RunResult]:
    """One sim run held in memory, writing no files: the events :func:`run_scenario` would
    write, for loops of many runs (explore, property tests). ``tie_seed`` (default: the
    scenario's, whose default is scheduling order) orders same-time events of different
    sources pseudo-randomly (elastic_sim.sim.kernel). ``guard``: as for :func:`run_scenario`.
    ``faults`` (default: the scenario's) and ``world`` (default: built from ``sc`` and
    ``seed``) spare a loop of runs of one scenario rebuilding it per run."""
    metrics, result, hist = _simulate(sc, seed, tie_seed, guard, faults, world, metrics_wanted=True)
    assert metrics is not None
    return hist, metrics, result


def simulate_trace(sc: Scenario, seed: int, tie_seed: int | None = None, *,
                   faults: list[Fault] | None = None, world: World | None = None
                   ) -> tuple[History, RunResult]:
    """:func:`simulate` without the metrics (the run's outcome, in its ``run_end``, is
    all that is worked out of it): the same events, for loops that only judge a run's
    trace (explore's cases and shrinks)."""
    _, result, hist = _simulate(sc, seed, tie_seed, None, faults, world, metrics_wanted=False)
    return hist, result


def _simulate(sc: Scenario, seed: int, tie_seed: int | None, guard: RunGuard | None,
              faults: list[Fault] | None, world: World | None, *, metrics_wanted: bool
              ) -> tuple[Metrics | None, RunResult, History]:
    if tie_seed is None:
        tie_seed = sc.tie_seed
    world = build_world(sc, seed, "sim") if world is None else world
    faults = sc.fault_objects() if faults is None else faults
    return _record(sc, world, faults, seed, "sim", Path(os.devnull), None, [], None, tie_seed,
                   guard or RunGuard(), metrics_wanted=metrics_wanted)


def _record(
    sc: Scenario, world: World, faults: list[Fault], seed: int, mode: Mode, out_dir: Path,
    part: Path | None, events: list[TraceEvent], progress: Callable[[str], None] | None,
    tie_seed: int | None, guard: RunGuard, launch: LaunchOptions | None = None,
    torchrun: TorchrunOptions | None = None, metrics_wanted: bool = True,
) -> tuple[Metrics | None, RunResult, History]:
    """Run the runtime, writing every event to ``part`` and ``events``; return the metrics,
    the result and the events as a :class:`History` (training summaries are read as their
    steps, made only for readers that need them one by one). With no ``part`` (an
    in-memory run nobody writes) events are neither encoded nor hashed."""
    with contextlib.ExitStack() as stack:
        writer = None
        emit: Callable[[TraceEvent], None] = events.append
        if part is not None:
            writer = TraceWriter(stack.enter_context(part.open("w", encoding="utf-8")))
            emit = _tee(events, writer)

        knobs = dict(world.args["knobs"])
        start: dict[str, Any] = {"scenario": sc.name, "seed": seed, "mode": mode,
                                 "protocol": sc.protocol.name, "knobs": knobs,
                                 "coordinator": knobs.get("driver_host") or sc.store_host}
        if tie_seed is not None:
            start["tie_seed"] = tie_seed
        emit(TraceEvent(0.0, "*", "elastic-sim", "run_start", start))
        guard.restart()
        result = _run_runtime(world, faults, seed, mode, out_dir, emit, progress, tie_seed,
                              guard, launch, torchrun)
        # A user's script under torchrun reports no steps: its job is done when torchrun is.
        steps = 0 if torchrun is not None and torchrun.script else sc.workload.steps
        metrics = compute(History(events), steps, result.exit_codes, result.hung,
                          result.end_time, sc.workload.batch_size) if metrics_wanted else None
        outcome = metrics.outcome if metrics is not None else outcome_of(
            [ev for ev in events if ev.kind == "job_done"], steps, result.hung)
        end: dict[str, Any] = {"outcome": outcome,
                               "exit_codes": dict(sorted(result.exit_codes.items()))}
        if result.stopped:
            end["stopped"] = result.stopped
        emit(TraceEvent(result.end_time, "*", "elastic-sim", "run_end", end))
        hist = History(events)
        result.trace_sha256 = writer.sha256 if writer else ""
        result.trace_events = writer.count if writer else hist.size
    return metrics, result, hist


def _tee(events: list[TraceEvent], writer: TraceWriter) -> Callable[[TraceEvent], None]:
    keep, write = events.append, writer.write

    def emit(ev: TraceEvent) -> None:
        keep(ev)
        write(ev)

    return emit


def _run_runtime(
    world: World, faults: list[Fault], seed: int, mode: Mode, out_dir: Path,
    emit: Callable[[TraceEvent], None], progress: Callable[[str], None] | None,
    tie_seed: int | None, guard: RunGuard, launch: LaunchOptions | None = None,
    torchrun: TorchrunOptions | None = None,
) -> RunResult:
    if mode == "sim":
        from elastic_sim import sim

        with watchdog(guard):
            return sim.run(world, faults, seed, emit, tie_seed, guard)
    try:
        from elastic_sim import real
    except ImportError as exc:  # torch missing
        raise ScenarioError("--mode real", "", f"real mode needs torch: {exc}") from None
    watch = None
    if progress:
        progress("starting real processes (importing torch takes a few seconds)")
        from elastic_sim.live import LiveStatus

        watch = LiveStatus(len(world.hosts), progress)
    if mode == "torchrun":
        from elastic_sim.real.torchrun import Options
        from elastic_sim.real.torchrun import run as run_torchrun

        return run_torchrun(world, faults, seed, out_dir / "torchrun", emit,
                            torchrun or Options(), launch=launch,
                            log=lambda line: print(line, file=sys.stderr, flush=True))
    return real.run(world, faults, seed, out_dir / "real", emit, launch=launch,
                    log=lambda line: print(line, file=sys.stderr, flush=True), guard=guard,
                    watch=watch)


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


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
