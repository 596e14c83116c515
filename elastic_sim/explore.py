"""``elastic-sim explore``: search fault schedules around a scenario, shrink each distinct
mechanism to a minimal schedule, and write it as a reproducer scenario.

A search is a pure function of (scenario, search seed, number of cases), whatever the
number of workers: the planner (:mod:`elastic_sim.corpus`) draws case ``i`` fresh from
the seed and its index (:mod:`elastic_sim.draws`: by default around the scenario's own
faults, over a swarm's part of the fault space) or as a mutation of a case that reached
something new, only ever from outcomes before it. Violations are told apart by mechanism
(:class:`~elastic_sim.mechanisms.Signature`: the check, its witness events' kinds, roles
and details, never the fault types around them); the first case showing one is shrunk,
with its reproducer written and run, as a task of its own on the workers while the search
goes on (a later, smaller case showing it is shrunk too: the smallest kept); findings are
taken in the order the search met them. Only the checks judge a case: the scenario's
expectations were written for its own schedule, not for generated ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.case_pool import CaseRunner
from elastic_sim.cases import Case, Outcome, case_run, event_triggers, run_case
from elastic_sim.checks.facts import limits_of
from elastic_sim.corpus import Fixed, Planner
from elastic_sim.draws import Search, make_case
from elastic_sim.explore_summary import exploration_json, write_summary
from elastic_sim.faults.around import Around
from elastic_sim.faults.model import DISCOVERY_FAULTS, FAULT_TYPES
from elastic_sim.faults.schedule import DEFAULT_TYPES, FaultSpace
from elastic_sim.findings import Finding, ordered
from elastic_sim.ledger import Ledger
from elastic_sim.mechanisms import Signature, signatures_of
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, with_faults

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
    "write_summary",
]

CURVE_EVERY = 25
"""Cases between two points of the coverage curve (besides one at each new mechanism)."""
TIMESCALE_CAP = 3600.0
"""Longest protocol timeout durations are drawn around (seconds)."""


@dataclass
class Exploration:
    """The result of a search."""

    scenario: str
    seed: int
    space: FaultSpace
    protocol: str = ""
    cases: int = 0
    wall_s: float = 0.0
    time_s: float | None = None
    """The time the search was given (``--time``)."""
    findings: list[Finding] = field(default_factory=list)
    """One per mechanism, in the order :func:`~elastic_sim.findings.ordered` lists."""
    ignored: tuple[str, ...] = ()
    """Checks not reported (known violations)."""
    shrink_runs: int = 0
    """Runs spent shrinking (on top of ``cases``)."""
    workers: int = 1
    search_s: float = 0.0
    """Seconds the workers spent running the search's cases (all workers together)."""
    shrink_s: float = 0.0
    """Seconds the workers spent shrinking and writing reproducers (all together)."""
    report_s: float = 0.0
    """Seconds spent rendering reports after the search."""
    cpu_s: float = 0.0
    """CPU seconds the workers' processes spent on cases and shrinks (below
    ``search_s + shrink_s`` where other processes took the CPU)."""
    stopped: bool = False
    """The search was interrupted (Ctrl-C, SIGTERM) before its budget or time was spent."""
    around: Around | None = None
    swarm: bool = True
    guided: bool = True
    reached: set[str] = field(default_factory=set)
    """Everything the cases reached (:mod:`elastic_sim.coverage`)."""
    first: dict[str, int] = field(default_factory=dict)
    """Each thing reached, by the case that reached it first."""
    curve: list[tuple[int, float, int, int]] = field(default_factory=list)
    """(cases, wall seconds, mechanisms, states) as the search went."""
    corpus: int = 0
    """Cases kept for reaching something new."""
    mutated: int = 0
    """Cases drawn as mutations of corpus entries."""
    unrendered: int = 0
    """Reports not rendered for want of time (``elastic-sim report DIR`` renders them)."""
    exhaustive: dict[str, Any] | None = None
    """What ``--exhaustive`` enumerated (:mod:`elastic_sim.exhaustive`), when it ran."""

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
        """Worker-seconds not spent running cases, shrinks or reports: starting, waiting
        for a task, or (with one worker) this process's own bookkeeping."""
        return max(0.0, self.workers * self.wall_s - self.search_s - self.shrink_s
                   - self.report_s)


def known_violations(sc: Scenario) -> tuple[str, ...]:
    """Checks the scenario says the modelled system breaks anyway (upstream's own bugs):
    a search does not report them again."""
    return sc.expect.known_violations()


def protocol_fault_types(sc: Scenario) -> tuple[str, ...]:
    """Every fault type the scenario's protocol can meet: all of them, less the
    discovery-source faults where it has no discovery source and those that need another
    ``cluster.device`` (GPU faults on CPUs)."""
    discovery = {c.scenario_type for c in DISCOVERY_FAULTS}
    has_source = sc.protocol_info().discovery
    return tuple(t for t, c in FAULT_TYPES.items()
                 if (has_source or t not in discovery) and c.device in ("", sc.cluster.device))


def timescales(sc: Scenario) -> tuple[float, ...]:
    """The protocol's own timeouts (its knobs named ``*timeout*``, up to
    :data:`TIMESCALE_CAP`), distinct, in order."""
    values = {float(v) for k, v in sc.knobs().items() if "timeout" in k
              and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v}
    return tuple(sorted(v for v in values if v <= TIMESCALE_CAP))


def space_for(sc: Scenario, *, types: Sequence[str] = DEFAULT_TYPES, max_faults: int = 3,
              max_duration: float | None = None, spare: Sequence[str] = (),
              horizon: float | None = None, max_crashes: int | None = None,
              triggers: bool = False, own_faults: bool = False) -> FaultSpace:
    """The schedules around ``sc``: its hosts and processes, faults within its base run's
    time (with ``triggers``, also at that run's protocol events), a quarter of them in its
    start-up window, durations up to ``max_duration`` (default: 1.5 times the protocol's
    longest timeout, at least 60 s) and around each of its timeouts. The base run is the
    scenario's own (``own_faults``: with its faults, as a search around them sees it) or
    fault-free."""
    base_sc = sc if own_faults else with_faults(sc, [], seed=sc.seed, name=sc.name)
    events, _, base = simulate(base_sc, sc.seed)
    if horizon is None:
        horizon = base.end_time
    formed = next((e.t for e in events if e.kind == "rdzv_done"), 0.0)
    scales = timescales(sc)
    if max_duration is None:
        max_duration = max(60.0, 1.5 * max(scales, default=0.0))
    procs = sorted({e.proc for e in events if e.kind == "proc_start"})
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
        timescales=tuple(s for s in scales if s <= max_duration),
        procs=tuple(procs),
        startup=round(min(formed, horizon), 3),
    )


# -- the search -------------------------------------------------------------------------

Progress = Callable[[int, int], None]
"""Called with (cases done, distinct mechanisms so far)."""
FAIL_ON = ("promise", "any")
"""What fails a campaign: a finding where the protocol broke its own promise, or any."""
REPORTS = ("new", "all", "none")
"""Whose reproducers get their HTML report at the end: the new mechanisms', all, none."""


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
    varies: Sequence[Any] = (),
    ray: str | None = None,
    around: Around | None = None,
    swarm: bool = True,
    guided: bool = True,
    reports: str = "new",
    cases: Sequence[Case] | None = None,
    observer: Callable[[Outcome], None] | None = None,
) -> Exploration:
    """Run up to ``budget`` cases (or for ``time_s`` seconds, to within one case); shrink
    each new mechanism and, with ``out_dir``, write its reproducer ``<out_dir>/<name>.yaml``
    and its run ``<out_dir>/<name>/`` (trace, summary; the HTML report, for the mechanisms
    ``reports`` names, at the end while time is left). Checks in ``ignore`` (default: the
    scenario's known violations) are not reported. With ``ties`` every case also draws a
    tie seed, kept in its reproducer; ``around``: the scenario's own faults, kept in every
    case (moved within its bounds); ``swarm``: each fresh case drawn over a drawn part of
    the space; ``guided``: half the cases mutate earlier cases that reached something new.
    With ``ray`` (an address, or ``"local"``) the cases run as Ray tasks; the findings are
    the same. ``cases``: run these (in order, as given) instead of drawing any;
    ``observer`` sees every case's outcome, in order."""
    if cases is not None:
        budget = len(cases) if budget is None else min(budget, len(cases))
    if budget is None and time_s is None:
        raise ValueError("explore needs a budget or a time limit")
    if reports not in REPORTS:
        raise ValueError(f"reports: expected one of {REPORTS}, got {reports!r}")
    res = Exploration(sc.name, seed, space, protocol=sc.protocol.name or "", time_s=time_s,
                      around=around, swarm=swarm, guided=guided)
    res.ignored = tuple(known_violations(sc) if ignore is None else ignore)
    limits = limits_of(sc.knobs(), sc.protocol.name)
    search = Search(sc, res.ignored, seed, space, ties, tuple(varies), around, swarm,
                    limits.progress_s if limits is not None else 0.0)
    planner: Planner | Fixed = Planner(search, guided) if cases is None else Fixed(cases)
    runner = CaseRunner(search, workers, ray)
    res.workers = runner.workers
    started = time.perf_counter()
    deadline = time.time() + time_s if time_s is not None else None
    book = Ledger(res, search, out_dir, started)
    try:
        for out in runner.outcomes(planner, budget, deadline):
            res.cases += 1
            planner.observe(out)
            if observer is not None:
                observer(out)
            if book.judge(out, runner, deadline):
                book.point(planner)
            if res.cases % CURVE_EVERY == 0:
                book.point(planner)
            book.settle(runner, wait=False)
            if progress:
                progress(res.cases, len(book.by_sig))
        book.settle(runner, wait=True)
        book.point(planner)
        if progress:
            progress(res.cases, len(book.by_sig))
    except BaseException:
        res.stopped = True  # Ctrl-C, SIGTERM: what was found so far is still written
        raise
    finally:
        runner.close()
        res.findings = ordered(book.by_sig.values())
        res.reached, res.first = planner.seen, planner.first
        res.corpus, res.mutated = len(planner.entries), planner.mutated
        res.wall_s = time.perf_counter() - started
        busy = runner.busy
        res.search_s, res.shrink_s = busy.search.wall_s, busy.shrink.wall_s
        res.cpu_s = busy.search.cpu_s + busy.shrink.cpu_s
        if out_dir is not None:
            if not res.stopped:
                _render(res, reports, deadline, started)
            write_summary(res, out_dir / "explore.json")
    return res


def _render(res: Exploration, reports: str, deadline: float | None, started: float) -> None:
    """Each wanted reproducer's HTML report (new first) while the search's time lasts."""
    from elastic_sim.reports.render import render_run_dir

    t0 = time.perf_counter()
    for f in res.findings:
        if f.run_dir is None or reports == "none" or (reports == "new" and not f.is_new):
            continue
        if deadline is not None and time.time() >= deadline:
            res.unrendered += 1
            continue
        render_run_dir(f.run_dir)
    res.report_s = time.perf_counter() - t0
    res.wall_s = time.perf_counter() - started
