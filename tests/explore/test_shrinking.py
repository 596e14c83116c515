"""How explore runs and shrinks cases: a case's run is exactly its reproducer's run (the
scenario is not rebuilt per case), a shrink runs each schedule once and nothing after the
candidate it takes, and its result and run count do not depend on the number of workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.explore import (
    Case,
    Outcome,
    Signature,
    case_run,
    explore,
    make_case,
    space_for,
)
from elastic_sim.faults.model import CrashHost, Fault, HangHost
from elastic_sim.faults.schedule import shrink_candidates
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, with_faults
from elastic_sim.shrinking import Memo, shrink, shrink_case
from elastic_sim.testing import load, variant
from elastic_sim.variation import apply_variation, parse_vary

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
BROKEN = Signature("committed_progress", "step,step", "crash")


def _reproducer_events(sc_path: str, case: Case) -> list[str]:
    sc = apply_variation(load(SCENARIOS / sc_path), case.variation)
    run = with_faults(sc, list(case.faults), seed=case.seed, name=sc.name,
                      tie_seed=case.tie_seed)
    events, _, _ = simulate(run, case.seed)
    return [repr(e) for e in events]


@pytest.mark.parametrize("sc_path,ties,vary", [
    ("torchelastic/scale_down.yaml", False, ""),
    ("torchelastic/scale_down.yaml", True, "knobs.max_restarts=0..3"),
    ("horovod/hosts_added_and_removed.yaml", True, ""),
    ("scale_down.yaml", False, ""),
])
def test_a_case_runs_exactly_as_its_reproducer_does(sc_path: str, ties: bool,
                                                   vary: str) -> None:
    sc = load(SCENARIOS / sc_path)
    space = space_for(sc)
    varies = [parse_vary(vary)] if vary else []
    for i in range(6):
        case = make_case(5, i, space, ties, varies)
        events, _ = case_run(sc, case)
        assert [repr(e) for e in events] == _reproducer_events(sc_path, case), i


class Fake:
    """A run that fails ``BROKEN`` while a crash of h1 is in the schedule, and counts
    the schedules it ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[Fault, ...]] = []

    def __call__(self, case: Case) -> Outcome:
        self.ran.append(case.faults)
        bad = any(isinstance(f, CrashHost) and f.host == "h1" for f in case.faults)
        sigs = [BROKEN] if bad else []
        return Outcome(case, sigs, {s: "broken" for s in sigs}, False)


SCHEDULE = (HangHost(id="a", at=0.5, host="h0", duration=3.0),
            CrashHost(id="b", at=2.25, host="h1"),
            HangHost(id="c", at=4.0, host="h2", duration=7.0))


def test_a_shrink_runs_each_schedule_once_and_nothing_after_the_one_it_takes() -> None:
    fake = Fake()
    memo = Memo(fake)
    got = shrink(memo, Case(0, SCHEDULE, 1), BROKEN)
    assert got.case.faults == (CrashHost(id="b", at=0.0, host="h1"),)
    assert got.signature == BROKEN
    assert got.runs == len(fake.ran) == len(set(fake.ran))  # no schedule run twice
    # Nothing runs after the candidate a step takes: the next run is one step simpler
    # than the last one that failed.
    failed = [f for f in fake.ran if any(isinstance(x, CrashHost) for x in f)]
    assert failed[-1] == got.case.faults
    for ran, nxt in zip(fake.ran, fake.ran[1:], strict=False):
        if ran in failed:
            assert nxt in shrink_candidates(ran)
    # The same case's second mechanism walks the same path: nothing runs again.
    again = shrink(memo, Case(0, SCHEDULE, 1), BROKEN)
    assert (again.case, again.runs, len(fake.ran)) == (got.case, 0, got.runs)


def test_a_shrink_keeps_its_result_within_its_candidate_limit() -> None:
    fake = Fake()
    got = shrink(Memo(fake), Case(0, SCHEDULE, 1), BROKEN, max_runs=2)
    assert got.runs == len(fake.ran) == 2
    # c dropped (the first candidate, taken), then a dropped (passes): the limit.
    assert got.case.faults == SCHEDULE[:2]
    assert fake.ran == [SCHEDULE[:2], SCHEDULE[:1]]


@pytest.mark.slow
def test_findings_and_shrink_runs_are_the_same_with_one_and_two_workers() -> None:
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "static-no-rollback",
                 "tests.explore.variants:no_rollback_main")
    space = space_for(sc)

    def found(workers: int) -> list[tuple[str, int, list[str], int, int]]:
        res = explore(sc, space, seed=3, budget=16, workers=workers)
        assert res.cases == 16 and res.search_s > 0
        assert res.shrink_s > 0 and res.shrink_runs >= sum(f.shrink_runs for f in res.findings)
        return [(str(f.signature), f.found_at, [repr(x) for x in f.faults], f.seed,
                 f.shrink_runs) for f in res.findings]

    one = found(1)
    assert one and one == found(2)


def test_shrink_case_shrinks_each_mechanism_of_a_case_in_order() -> None:
    sc = variant(load(SCENARIOS / "scale_down.yaml"), "static-no-rollback",
                 "tests.explore.variants:no_rollback_main")
    space = space_for(sc)
    case = next(c for c in (make_case(0, i, space) for i in range(40))
                if len(c.faults) >= 2 and _signatures(sc, c))
    sigs = _signatures(sc, case)
    done = shrink_case(sc, (), case, sigs)
    assert [s.signature.check for s in done] == [s.check for s in sigs]
    assert all(len(s.case.faults) <= len(case.faults) for s in done)


def _signatures(sc: Scenario, case: Case) -> list[Signature]:
    from elastic_sim.explore import run_case

    return run_case(sc, case).signatures


def test_workers_fork_only_while_no_other_thread_runs() -> None:
    import sys
    import threading

    from elastic_sim.campaign import start_method

    if sys.platform != "linux":
        assert start_method() == "spawn"
        return
    if threading.active_count() > 1:
        pytest.skip("this test process runs other threads (a plugin's)")
    assert start_method() == "fork"
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert start_method() == "spawn"
    finally:
        stop.set()
        t.join()


def test_the_cli_s_progress_bar_leaves_explore_s_workers_free_to_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import threading

    import elastic_sim.campaign as pool
    from elastic_sim.cli import main

    if sys.platform != "linux" or threading.active_count() > 1:
        pytest.skip("workers fork on Linux from a process with no other thread")
    chosen: list[str] = []
    real = pool.start_method

    def spy() -> str:
        chosen.append(real())
        return chosen[-1]

    monkeypatch.setattr(pool, "start_method", spy)
    rc = main(["explore", str(SCENARIOS / "scale_down.yaml"), "--budget", "4",
               "--workers", "2", "--out", str(tmp_path / "x"), "--faults", "crash"])
    assert rc in (0, 1) and chosen == ["fork"]
