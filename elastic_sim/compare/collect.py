"""Run one scenario under several modes and judge whether they agree.

Per mode, N runs (seeds ``seed``, ``seed+1``, ...; in the sim each seed is a different
run, in real and torchrun mode each is a repetition). What is compared, per mode,
everything a user reads of a run:

- the membership sequence: the members of every formed round, in order (the mode's most
  common sequence; every distinct one is kept), and the outcome;
- per fault, the recovery (fault to the first training step of the new world) split into
  detect, rendezvous, sync (new world formed to state synced: process start, import,
  group init, the state broadcast) and first step, its stall and its lost steps, medians
  over the runs;
- the run's stalls, lost steps and end; each check's verdict (pass, fail, or n/a with
  what it lacked).

Modes disagree when their membership sequences or outcomes differ, or when a figure of
theirs lies outside the tolerance of the reference mode's (the most real mode compared:
torchrun, else real, else the first): a time by more than ``tolerance`` (relative) and
``slack`` seconds, lost steps by more than the tolerance and one step. A disagreement
comes with its likely cause (:data:`CAUSES`).
"""

from __future__ import annotations

import shutil
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.backends import BACKENDS, backend
from elastic_sim.errors import ScenarioError
from elastic_sim.reports.metrics import PHASE_NAMES, round_ends
from elastic_sim.scenario import Scenario
from elastic_sim.spec import RunSpec

PHASES = tuple(PHASE_NAMES.items())
"""(metrics phase, name shown): the recovery split, named as every report names it."""


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
    """Fault id -> recovery_s, the phases, stall_s, lost_steps."""
    lost_steps: int = 0
    stalled_s: float = 0.0
    """Time with live members and no training progress, all of the run's stalls."""
    end_s: float | None = None
    """When the job ended (its last process exited), run time."""
    checks: dict[str, str] = field(default_factory=dict)
    """Check -> "pass", "fail" or "n/a: what it lacked"."""
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
    stalled_s: float | None = None
    end_s: float | None = None


@dataclass
class Comparison:
    """Every mode's summary and the disagreements found."""

    scenario: str
    modes: list[str]
    reference: str
    tolerance: float
    summaries: dict[str, ModeSummary]
    disagreements: list[str]
    slack: float = 0.5
    """Seconds any time may differ by whatever the tolerance (a few hundred milliseconds
    of scheduling noise on a tenth-of-a-second figure is no disagreement)."""
    hints: list[str] = field(default_factory=list)
    """Likely causes of the disagreements, and what to try."""
    structural: list[str] = field(default_factory=list)
    """The disagreements that are not about timing: membership, outcome, runs that broke
    or differ among themselves (timing on a loaded machine explains none of these)."""

    @property
    def agree(self) -> bool:
        """No disagreement."""
        return not self.disagreements

    def to_json(self) -> dict[str, Any]:
        """Plain data for compare.json."""
        return {"scenario": self.scenario, "modes": self.modes, "reference": self.reference,
                "tolerance": self.tolerance, "slack_s": self.slack, "agree": self.agree,
                "disagreements": self.disagreements, "structural": self.structural,
                "hints": self.hints,
                "summaries": {m: asdict(s) for m, s in self.summaries.items()}}


def parse_modes(text: str) -> list[str]:
    """``sim,real,torchrun`` -> the modes, each a registered backend named once."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in BACKENDS]
    if bad or not modes or len(set(modes)) != len(modes):
        raise ScenarioError("--modes", "", f"expected distinct modes among "
                            f"{', '.join(BACKENDS)} separated by commas, got {text!r}")
    return modes


def figures(mode: str, seed: int, out_dir: Path, report: Any) -> RunFigures:
    """The figures of one finished run (a :class:`elastic_sim.pipeline.RunReport`)."""
    m = report.metrics
    fig = RunFigures(mode, seed, str(out_dir), report.exit_code, m.outcome)
    fig.membership = [list(r.members) for r in m.rounds]
    for rec in m.recoveries:
        row: dict[str, float | None] = {"recovery_s": _r(rec.recovery_s)}
        row.update({k: _r(v) for k, v in rec.phases().items()})
        row["stall_s"] = _r(rec.stall_s)
        row["lost_steps"] = rec.lost_steps
        fig.recoveries[rec.id] = row
    fig.lost_steps = m.lost_steps
    fig.stalled_s = round(m.stalled_s, 3)
    fig.end_s = _r(m.end_time)
    fig.start_ups = start_ups(report.events)
    for c in report.checks:
        fig.checks[c.name] = ("fail" if c.status == "fail" else "pass" if c.status == "pass"
                              else f"n/a: {c.examined}")
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
                      for k in ("recovery_s", *(p for p, _ in PHASES), "stall_s", "lost_steps")}
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
                       outcomes, recoveries, _median([float(r.lost_steps) for r in ok]), checks,
                       _median([r.stalled_s for r in ok]), _median([r.end_s for r in ok]))


def reference_of(modes: Sequence[str]) -> str:
    """The mode the others are held against: the most real one compared (the first of
    those as real)."""
    return max(modes, key=lambda m: backend(m, "--modes").realism)


TIMES = (("recovery_s", "recovery"), *PHASES, ("stall_s", "stalled"))
"""A fault's times compared between modes, with the name every report shows."""
CAUSES = {
    "detect": "failure detection: how soon survivors notice a dead or silent peer (a "
              "collective failing at once, or only at its timeout)",
    "rendezvous": "re-rendezvous: the rendezvous's timing (last call, keep-alives, the "
                  "agents' polling)",
    "sync": "worker start-up: a restarted worker's interpreter, import torch and group "
            "init, which the machine's load sets (--sim-start-up reference runs the sim "
            "with the start-up the reference mode measured; --sim-start-up measure times "
            "it here first)",
    "first_step": "the first step: compute and the first collective of the new world",
    "stall_s": "stalls: time with live members and no progress",
}
"""What a disagreement in each figure most likely comes from, and what to try."""
STEP_SLACK = 1
"""Lost steps may differ by this many whatever the tolerance (a fault landing just before
or just after a step)."""


def _off(got: float, want: float, tolerance: float, slack: float) -> bool:
    return abs(got - want) > max(tolerance * abs(want), slack)


def _pct(got: float, want: float) -> str:
    return f"{100 * (got - want) / want:+.0f}%" if want else "from 0"


def judge(sc: Scenario, modes: list[str], summaries: dict[str, ModeSummary],
          tolerance: float, slack: float = 0.5) -> Comparison:
    """Every disagreement between the reference mode and the others, in everything a user
    reads of a run: membership, outcome, each fault's recovery, phases, stall and lost
    steps, the run's stalls, lost steps and end. A time disagrees when it is off by more
    than ``tolerance`` (relative) and ``slack`` seconds; lost steps by more than the
    tolerance and :data:`STEP_SLACK`. Each disagreement's likely cause is among the hints."""
    ref = reference_of(modes)
    base = summaries[ref]
    out: list[str] = []
    structural: list[str] = []
    causes: list[str] = []
    for m in modes:
        s = summaries[m]
        errors = [r.error for r in s.runs if r.error]
        found = []
        if errors:
            found.append(f"{m}: {len(errors)} of {len(s.runs)} runs failed to run: "
                         f"{errors[0]}")
        if len(s.memberships) > 1:
            found.append(f"{m}: its runs formed different membership sequences: "
                         + " / ".join(_seq(x) for x in s.memberships))
        if m != ref and s.membership != base.membership:
            found.append(f"membership: {m} {_seq(s.membership)} vs {ref} "
                         f"{_seq(base.membership)}")
        if m != ref and s.outcome != base.outcome:
            found.append(f"outcome: {m} {s.outcome} vs {ref} {base.outcome}")
        structural += found
        out += found
        if m == ref:
            continue
        for fid, rec in base.recoveries.items():
            mine = s.recoveries.get(fid, {})
            want, got = rec.get("recovery_s"), mine.get("recovery_s")
            if (want is None) != (got is None):
                out.append(f"recovery {fid}: {m} {_s(got)} vs {ref} {_s(want)}")
            for key, name in TIMES:
                w, g = rec.get(key), mine.get(key)
                if w is None or g is None or not _off(g, w, tolerance, slack):
                    continue
                out.append(f"{name} {fid}: {m} {g:.2f} s vs {ref} {w:.2f} s, {_pct(g, w)} "
                           f"(tolerance ±{100 * tolerance:.0f}%, {slack:g} s)")
                if key in CAUSES and CAUSES[key] not in causes:
                    causes.append(CAUSES[key])
            w, g = rec.get("lost_steps"), mine.get("lost_steps")
            if w is not None and g is not None and _off(g, w, tolerance, STEP_SLACK):
                out.append(f"lost steps {fid}: {m} {g:g} vs {ref} {w:g}")
        for name, w, g, unit in (("stalled", base.stalled_s, s.stalled_s, slack),
                                 ("job end", base.end_s, s.end_s, slack),
                                 ("lost steps", base.lost_steps, s.lost_steps, STEP_SLACK)):
            if w is not None and g is not None and _off(g, w, tolerance, unit):
                shown = (f"{g:g} vs {ref} {w:g}" if name == "lost steps"
                         else f"{g:.2f} s vs {ref} {w:.2f} s, {_pct(g, w)}")
                out.append(f"{name}: {m} {shown}")
    hints = [f"likely: {c}" for c in causes]
    return Comparison(sc.name, modes, ref, tolerance, summaries, out, slack, hints, structural)


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


def run_one(specs: dict[str, RunSpec], mode: str, seed: int, run_dir: Path) -> RunFigures:
    """One run of one mode with ``seed`` into ``run_dir`` (a campaign task; ``specs``: the
    comparison's spec per mode); a run that broke is recorded as such."""
    from elastic_sim.pipeline import execute

    try:
        report = execute(specs[mode].rerun(seed), run_dir)
        return figures(mode, seed, run_dir, report)
    except ScenarioError:
        raise
    except Exception as exc:  # a run that broke: reported as such
        return RunFigures(mode, seed, str(run_dir), error=f"{type(exc).__name__}: {exc}"[:300])


def compile_modes(sc: Scenario, file: str, modes: Sequence[str], seed: int,
                  script: tuple[str, ...] = (), launch: Any = None) -> dict[str, RunSpec]:
    """Each mode's spec, every refusal before anything runs. A backend that only runs
    here (the sim) runs here whatever ``launch`` says; a script goes to the backends
    that take one."""
    from elastic_sim.spec import compile_spec

    specs = {}
    for m in modes:
        b = backend(m, "--modes")
        specs[m] = compile_spec(sc, file=file, seed=seed, mode=b,
                                script=script if b.takes_script else (),
                                launch=None if b.launchers == ("local",) else launch)
    return specs


def run_modes(specs: dict[str, RunSpec], runs: int, seed: int, out: Path,
              progress: Callable[[str], None] | None = None,
              ray: str | None = None,
              sim_start_up: float | str | None = None) -> dict[str, ModeSummary]:
    """Run every mode's spec (:func:`compile_modes`) ``runs`` times, seeds ``seed``,
    ``seed + 1``, ..., on the campaign executor (here, or on Ray with ``ray``: an address
    or ``"local"``: deterministic modes' runs at once, timed ones one at a time); a run
    that cannot start is recorded, not fatal. ``sim_start_up`` replaces the scenario's
    ``cluster.process_start`` in the sim's runs: seconds, or ``"reference"`` for what the
    reference mode's restarted workers took (it then runs first;
    :func:`reference_start_up`)."""
    from elastic_sim.campaign import Executor

    modes = list(specs)

    def run_dir(job: tuple[str, int]) -> Path:
        return out / job[0] / f"run{job[1] - seed}"

    jobs_of = {m: [(m, seed + k) for k in range(runs)] for m in modes}
    for jobs in jobs_of.values():
        for job in jobs:
            fresh_run_dir(run_dir(job))  # before anything runs
    total = len(modes) * runs

    def batch(which: list[str], specs: dict[str, RunSpec]) -> list[RunFigures]:
        jobs = [job for m in which for job in jobs_of[m]]
        figs = []
        with Executor(specs, 1, ray) as executor:
            results = executor.map(run_one, jobs, out_dirs=run_dir,
                                   alone=lambda job: not specs[job[0]].backend.deterministic)
            for job, fig in zip(jobs, results, strict=True):
                fig.out_dir = str(run_dir(job))
                figs.append(fig)
                if progress:
                    progress(f"{job[0]} run {job[1] - seed + 1}/{runs} done ({len(figs)} of "
                             f"{total})")
        return figs

    if sim_start_up is None or "sim" not in modes:
        figs = batch(modes, specs)
    else:
        others = [m for m in modes if m != "sim"]
        first = batch(others, specs) if sim_start_up == "reference" else []
        ref = reference_of(modes)
        given = (reference_start_up(summarise(ref, by_mode(first).get(ref, [])))
                 if sim_start_up == "reference" else float(sim_start_up))
        if given is not None:
            sc = specs["sim"].scenario
            msc = sc.model_copy(update={
                "cluster": sc.cluster.model_copy(update={"process_start": given})})
            specs = {**specs, **compile_modes(msc, specs["sim"].file, ["sim"], seed)}
        figs = [*first, *batch(["sim"], specs),
                *([] if sim_start_up == "reference" else batch(others, specs))]
    grouped = by_mode(figs)
    return {m: summarise(m, grouped.get(m, [])) for m in modes}


def by_mode(figs: Sequence[RunFigures]) -> dict[str, list[RunFigures]]:
    """Runs grouped by the mode that ran them, in order."""
    out: dict[str, list[RunFigures]] = {}
    for f in figs:
        out.setdefault(f.mode, []).append(f)
    return out
