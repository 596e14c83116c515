"""Run one scenario under several modes and judge whether they agree.

Per mode, N runs (seeds ``seed``, ``seed+1``, ...; in the sim each seed is a different
run, in real and torchrun mode each is a repetition). What is compared, per mode:

- the membership sequence: the members of every formed round, in order (the mode's most
  common sequence; every distinct one is kept);
- per fault, the recovery (fault to the first training step of the new world) split into
  detect, re-rendezvous, start-up (new world formed to state synced: process start,
  import, group init) and first step, medians over the runs;
- lost steps, the outcome, and each check's verdict (pass, fail, or n/a with why).

Modes disagree when their membership sequences or outcomes differ, or when a fault's
median recovery lies outside ``tolerance`` (relative) of the reference mode's: the most
real mode compared (torchrun, else real, else the first).
"""

from __future__ import annotations

import shutil
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.errors import ScenarioError
from elastic_sim.reports.metrics import round_ends
from elastic_sim.scenario import Scenario

MODES = ("sim", "real", "torchrun")
PHASES = (("detect", "detect"), ("rendezvous", "re-rendezvous"), ("sync", "start-up"),
          ("first_step", "first step"))
"""(metrics phase, name shown): the recovery split."""


@dataclass
class RunFigures:
    """What one run of one mode showed."""

    mode: str
    seed: int
    out_dir: str
    exit_code: int | None = None
    outcome: str = "error"
    membership: list[list[str]] = field(default_factory=list)
    recoveries: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Fault id -> recovery_s, the phases, lost_steps."""
    lost_steps: int = 0
    checks: dict[str, str] = field(default_factory=dict)
    """Check -> "pass", "fail" or "n/a: why"."""
    timeline: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    start_ups: list[float] = field(default_factory=list)
    """Seconds from an agent starting its workers after a restart to each one's group
    init (interpreter, ``import torch``, store connect): the workers' start-up."""


@dataclass
class ModeSummary:
    """A mode's runs, summarised."""

    mode: str
    runs: list[RunFigures]
    membership: list[list[str]]
    memberships: list[list[list[str]]]
    """Every distinct sequence its runs formed, the most common first."""
    outcome: str
    outcomes: list[str]
    recoveries: dict[str, dict[str, float | None]]
    lost_steps: float | None
    checks: dict[str, str]


@dataclass
class Comparison:
    """Every mode's summary and the disagreements found."""

    scenario: str
    modes: list[str]
    reference: str
    tolerance: float
    summaries: dict[str, ModeSummary]
    disagreements: list[str]

    @property
    def agree(self) -> bool:
        """No disagreement."""
        return not self.disagreements

    def to_json(self) -> dict[str, Any]:
        """Plain data for compare.json."""
        return {"scenario": self.scenario, "modes": self.modes, "reference": self.reference,
                "tolerance": self.tolerance, "agree": self.agree,
                "disagreements": self.disagreements,
                "summaries": {m: asdict(s) for m, s in self.summaries.items()}}


def parse_modes(text: str) -> list[str]:
    """``sim,real,torchrun`` -> the modes, each known and named once."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes or len(set(modes)) != len(modes):
        raise ScenarioError("--modes", "", f"expected distinct modes among {', '.join(MODES)}"
                            f" separated by commas, got {text!r}")
    return modes


def figures(mode: str, seed: int, out_dir: Path, report: Any) -> RunFigures:
    """The figures of one finished run (a :class:`elastic_sim.runner.RunReport`)."""
    m = report.metrics
    fig = RunFigures(mode, seed, str(out_dir), report.exit_code, m.outcome)
    fig.membership = [list(r.members) for r in m.rounds]
    for rec in m.recoveries:
        row: dict[str, float | None] = {"recovery_s": _r(rec.recovery_s)}
        row.update({k: _r(v) for k, v in rec.phases().items()})
        row["lost_steps"] = rec.lost_steps
        fig.recoveries[rec.id] = row
    fig.lost_steps = m.lost_steps
    fig.start_ups = start_ups(report.events)
    for c in report.checks:
        fig.checks[c.name] = (f"n/a: {c.not_judged}" if c.not_judged
                              else "pass" if c.ok else "fail")
    ends = round_ends(report.events, m.rounds, m.end_time)
    fig.timeline = {
        "end": _r(m.end_time),
        "hosts": sorted({ev.host for ev in report.events if ev.host != "*"}),
        "rounds": [{"round": r.round, "members": list(r.members), "formed_at": _r(r.formed_at),
                    "first_step_at": _r(r.first_step_at), "end": _r(ends.get(r.round))}
                   for r in m.rounds],
        "faults": [{"id": f.id, "type": f.type, "at": _r(f.at)} for f in report.result.faults
                   if f.fired],
    }
    return fig


def start_ups(events: Sequence[Any]) -> list[float]:
    """Each restarted worker's start-up: from its agent's ``workers_started`` (a round
    after the first) to the worker's ``group_init`` on the same host."""
    last: dict[str, tuple[float, int]] = {}
    out = []
    for e in events:
        if e.kind == "workers_started":
            last[e.host] = (e.t, int(e.get("round", 0)))
        elif e.kind == "group_init" and e.host in last and last[e.host][1] >= 1:
            out.append(round(e.t - last[e.host][0], 3))
    return out


def reference_start_up(summary: ModeSummary) -> float | None:
    """The median restarted worker's start-up over a mode's runs (None: no restart)."""
    vals = [x for r in summary.runs for x in r.start_ups]
    return round(statistics.median(vals), 3) if vals else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(statistics.median(vals), 3) if vals else None


def summarise(mode: str, runs: list[RunFigures]) -> ModeSummary:
    """Most common membership and outcome, median recoveries, combined check verdicts."""
    ok = [r for r in runs if not r.error]
    seqs = Counter(repr(r.membership) for r in ok)
    by_repr = {repr(r.membership): r.membership for r in ok}
    membership = by_repr[seqs.most_common(1)[0][0]] if seqs else []
    outcomes = [r.outcome for r in runs]
    fault_ids = sorted({f for r in ok for f in r.recoveries})
    recoveries = {f: {k: _median([r.recoveries.get(f, {}).get(k) for r in ok])
                      for k in ("recovery_s", *(p for p, _ in PHASES), "lost_steps")}
                  for f in fault_ids}
    checks: dict[str, str] = {}
    for r in ok:
        for name, verdict in r.checks.items():
            prev = checks.get(name)
            if prev is None or verdict == "fail" or (prev.startswith("n/a")
                                                     and verdict == "pass"):
                checks[name] = verdict
    return ModeSummary(mode, runs, membership, [by_repr[k] for k, _ in seqs.most_common()],
                       Counter(outcomes).most_common(1)[0][0] if outcomes else "error",
                       outcomes, recoveries, _median([float(r.lost_steps) for r in ok]), checks)


def reference_of(modes: Sequence[str]) -> str:
    """The mode the others are held against: the most real one compared."""
    for m in ("torchrun", "real"):
        if m in modes:
            return m
    return modes[0]


def judge(sc: Scenario, modes: list[str], summaries: dict[str, ModeSummary],
          tolerance: float) -> Comparison:
    """Every disagreement between the reference mode and the others."""
    ref = reference_of(modes)
    base = summaries[ref]
    out: list[str] = []
    for mode in modes:
        s = summaries[mode]
        errors = [r.error for r in s.runs if r.error]
        if errors:
            out.append(f"{mode}: {len(errors)} of {len(s.runs)} runs failed to run: "
                       f"{errors[0]}")
        if len(s.memberships) > 1:
            out.append(f"{mode}: its runs formed different membership sequences: "
                       + " / ".join(_seq(x) for x in s.memberships))
        if mode == ref:
            continue
        if s.membership != base.membership:
            out.append(f"membership: {mode} {_seq(s.membership)} vs {ref} "
                       f"{_seq(base.membership)}")
        if s.outcome != base.outcome:
            out.append(f"outcome: {mode} {s.outcome} vs {ref} {base.outcome}")
        for fid, rec in base.recoveries.items():
            want, got = rec.get("recovery_s"), s.recoveries.get(fid, {}).get("recovery_s")
            if want is None and got is None:
                continue
            if want is None or got is None:
                out.append(f"recovery {fid}: {mode} {_s(got)} vs {ref} {_s(want)}")
            elif abs(got - want) > tolerance * want:
                out.append(f"recovery {fid}: {mode} {got:.2f} s vs {ref} {want:.2f} s, "
                           f"{100 * (got - want) / want:+.0f}% (tolerance ±"
                           f"{100 * tolerance:.0f}%)")
    return Comparison(sc.name, modes, ref, tolerance, summaries, out)


def _seq(membership: list[list[str]]) -> str:
    return " -> ".join("[" + ",".join(m) + "]" for m in membership) or "(no round)"


def _s(x: float | None) -> str:
    return "not recovered" if x is None else f"{x:.2f} s"


RUN_MARKS = ("summary.json", "trace.jsonl", "trace.jsonl.part")
"""Files that make a directory one of this tool's run directories."""


def fresh_run_dir(run_dir: Path) -> None:
    """Empty ``run_dir`` of an earlier compare's run (a second compare into the same
    ``--out`` must not mix the earlier run's files, e.g. torchrun's per-worker logs, into
    this one's trace); refuse a non-empty directory that is not a run directory."""
    if not run_dir.exists():
        return
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        return
    if not run_dir.is_dir() or not any((run_dir / m).exists() for m in RUN_MARKS):
        raise ScenarioError(str(run_dir), "--out",
                            "exists and is not a run directory of an earlier compare "
                            "(expected summary.json or trace.jsonl in it); choose another "
                            "--out")
    shutil.rmtree(run_dir)


def run_one(sc: Scenario, file: str, mode: str, seed: int, run_dir: Path,
            torchrun: Any = None, launch: Any = None) -> RunFigures:
    """One run of one mode into ``run_dir`` (real and torchrun mode placed by ``launch``,
    cluster options); a run that broke is recorded as such (bad input is raised)."""
    from elastic_sim.runner import run_scenario

    fresh_run_dir(run_dir)
    try:
        report = run_scenario(sc, seed=seed, mode=mode,  # type: ignore[arg-type]
                              out_dir=run_dir, file=file,
                              torchrun=torchrun if mode == "torchrun" else None,
                              launch=None if mode == "sim" else launch)
        return figures(mode, seed, run_dir, report)
    except ScenarioError:
        raise
    except Exception as exc:  # a run that broke: reported as such
        return RunFigures(mode, seed, str(run_dir), error=f"{type(exc).__name__}: {exc}"[:300])


def run_modes(sc: Scenario, file: str, modes: list[str], runs: int, seed: int, out: Path,
              torchrun: Any = None,
              progress: Callable[[str], None] | None = None,
              ray: str | None = None,
              launch: Any = None,
              sim_start_up: float | str | None = None) -> dict[str, ModeSummary]:
    """Run every mode ``runs`` times (on Ray with ``ray``: an address or ``"local"``); a
    run that cannot start is recorded, not fatal (bad input is: it is refused before
    anything runs). ``launch`` (cluster options) places real and torchrun mode's hosts;
    the sim always runs here. ``sim_start_up`` replaces the scenario's
    ``cluster.process_start`` in the sim's runs: seconds, or ``"reference"`` for what the
    reference mode's restarted workers took (it then runs first;
    :func:`reference_start_up`)."""
    from elastic_sim.runner import refuse_unsupported

    faults = sc.fault_objects()
    for mode in modes:  # refuse before anything runs
        refuse_unsupported(sc, faults, mode, file)  # type: ignore[arg-type]

    def batch(which: list[str], scen: Scenario) -> list[RunFigures]:
        jobs = [(m, seed + k, out / m / f"run{k}") for m in which for k in range(runs)]
        if ray is not None:
            from elastic_sim.ray_cases import compare_on_ray

            return list(compare_on_ray(scen, file, jobs, torchrun, ray, progress))
        figs = []
        for n, (mode, s, run_dir) in enumerate(jobs):
            if progress:
                progress(f"{mode} run {s - seed + 1}/{runs} ({n + 1} of {len(jobs)})")
            figs.append(run_one(scen, file, mode, s, run_dir, torchrun, launch))
        return figs

    if sim_start_up is None or "sim" not in modes:
        figs = batch(modes, sc)
    else:
        others = [m for m in modes if m != "sim"]
        first = batch(others, sc) if sim_start_up == "reference" else []
        ref = reference_of(modes)
        given = (reference_start_up(summarise(ref, [f for f in first if f.mode == ref]))
                 if sim_start_up == "reference" else float(sim_start_up))
        msc = sc if given is None else sc.model_copy(update={
            "cluster": sc.cluster.model_copy(update={"process_start": given})})
        figs = [*first, *batch(["sim"], msc),
                *([] if sim_start_up == "reference" else batch(others, sc))]
    return {mode: summarise(mode, [f for f in figs if f.mode == mode]) for mode in modes}


