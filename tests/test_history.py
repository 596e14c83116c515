"""Reading a trace's training summaries natively (elastic_sim.history) gives what reading
their expansion step by step gives: the same metrics, check verdicts with the same
evidence, expectations and contract standing, on every shipped scenario and found/
reproducer at its own seed, at both fidelities. The normal lane runs a subset; ``-m slow``
runs them all. Also: the History's own answers (order by kind, next event after a point)
against the expanded view, on traces whose summaries interleave with other events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.checks import run_checks
from elastic_sim.checks.contracts import judge
from elastic_sim.expect import evaluate
from elastic_sim.history import History
from elastic_sim.pipeline import simulate
from elastic_sim.reports.metrics import compute
from elastic_sim.scenario import Scenario, load_scenario
from elastic_sim.trace import STRETCH, TraceEvent, encode, expand_stretches
from elastic_sim.vocabulary import recorded

ROOT = Path(__file__).resolve().parents[1]
ALL = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").rglob("*.yaml"))
QUICK = [
    "scenarios/scale_down.yaml",
    "scenarios/torchelastic/worker_crash.yaml",
    "scenarios/torchelastic/partition_heals.yaml",
    "scenarios/torchelastic/store_host_crash.yaml",
    "scenarios/horovod/hosts_added_and_removed.yaml",
    "scenarios/found/torchelastic/hot_spare_wait_list_livelock.yaml",
    "scenarios/hang_heals.yaml",
]


def _readings(sc: Scenario, raw: list[TraceEvent], events: list[TraceEvent] | History,
              end: dict[str, Any]) -> dict[str, Any]:
    """Everything summary.json reads off a trace (but the trace's own size and hash)."""
    body = events[:-1] if isinstance(events, list) else History(raw[:-1])
    m = compute(body, sc.workload.steps, end["exit_codes"], end["hung"], end["end_time"],
                sc.workload.batch_size)
    checks = run_checks(events)
    contract = judge(events, checks)
    return {
        "metrics": m.to_json(),
        "checks": [(c.name, c.ok, c.checked, c.examined,
                    [(v.message, [encode(e) for e in v.witness]) for v in c.violations])
                   for c in checks],
        "expectations": [vars(e) for e in evaluate(sc.expect, m, events, (), checks)],
        "contract": None if contract is None else (contract.broken_assumptions,
                                                   contract.standing),
    }


def _same_readings(path: str, fidelity: str) -> None:
    sc = load_scenario(ROOT / path).model_copy(update={"fidelity": fidelity})
    hist, _, result = simulate(sc, sc.seed)
    raw = hist.raw
    assert raw[-1].kind == "run_end"
    end = {"exit_codes": result.exit_codes, "hung": result.hung, "end_time": result.end_time}
    expanded = list(expand_stretches(raw))
    native = _readings(sc, raw, History(raw), end)
    stepwise = _readings(sc, raw, expanded, end)
    for key in stepwise:
        assert json.dumps(native[key], default=str) == json.dumps(stepwise[key], default=str), key
    assert History(raw).size == len(expanded)


@pytest.mark.parametrize("fidelity", ["fast", "fine"])
@pytest.mark.parametrize("path", QUICK)
def test_native_reading_equals_the_expanded_one(path: str, fidelity: str) -> None:
    _same_readings(path, fidelity)


@pytest.mark.slow
@pytest.mark.parametrize("fidelity", ["fast", "fine"])
@pytest.mark.parametrize("path", [p for p in ALL if p not in QUICK])
def test_native_reading_equals_the_expanded_one_everywhere(path: str, fidelity: str) -> None:
    _same_readings(path, fidelity)


def test_quick_subset_has_summaries_and_exists() -> None:
    for path in QUICK:
        assert path in ALL, path
    sc = load_scenario(ROOT / QUICK[1])
    assert any(ev.kind == STRETCH for ev in simulate(sc, sc.seed)[0].raw)


def _perturbed(raw: list[TraceEvent], seed: int) -> list[TraceEvent]:
    """``raw`` with events put amid its training stretches, at their very instants (ties)
    or between them: a stretch's own process recording something (it interrupts it), a
    new round for it, a different collective into its group, faults, a job end, the
    coordinator starting again; what the sim never records there, the readers must still
    read as they read the expanded trace."""
    import random

    rng = random.Random(seed)
    out = list(raw[:-1])
    stretches = [(r, ev) for r, ev in enumerate(raw) if ev.kind == STRETCH and ev.get("steps")]
    plain = [ev for ev in raw[1:-1] if ev.kind != STRETCH]
    start = raw[0]
    coord = str(start.get("coordinator") or "h0")
    for _ in range(rng.randint(1, 6)):
        _, st = rng.choice(stretches)
        d = st.data
        i = rng.randrange(int(d["steps"]))
        t = float(d["start"]) + (i + rng.choice((0.0, 1.0, 0.5))) * (float(d["sleep"])
                                                                    + float(d["cost"]))
        times = History([st]).stretches[0].times
        t = rng.choice([t, times[min(len(times) - 1, 3 * i + rng.randrange(3))]])
        what = rng.randrange(9)
        if what == 7:  # a stretch's own round, changed just before it: mixed rounds
            out.insert(rng.randrange(1, len(out) + 1), TraceEvent(
                float(d["start"]), st.host, st.proc, "rdzv_done",
                {"round": 98, "members": [st.host], "rank": 0, "world_size": 1}))
            continue
        if what == 8:  # nothing recorded for a while but training, then the job ends
            w = rng.uniform(0.5, 20.0)
            out = [e for e in out if e.kind == STRETCH or e.kind in ("run_start", "fault")
                   or not t - w <= e.t <= t + w]
            out.insert(rng.randrange(1, len(out) + 1),
                       TraceEvent(t + rng.choice((0.0, 1e-9)), st.host, f"{st.host}/main",
                                  rng.choice(("job_done", "job_failed")), {"step": 1}))
            continue
        if what == 0:
            ev = rng.choice(plain)
            ev = TraceEvent(t, st.host, st.proc, ev.kind, ev.data)
        elif what == 1:
            ev = TraceEvent(t, st.host, st.proc, "rdzv_done",
                            {"round": 99, "members": [st.host], "rank": 0, "world_size": 1})
        elif what == 2:
            ev = TraceEvent(t, st.host, st.proc, "coll_enter",
                            {"group": d["group"], "seq": int(d["seq"]) + i, "op": "broadcast",
                             "nbytes": 1})
        elif what == 3:  # a hang of the stretch's host, healed a while later
            fault = {"id": f"odd{len(out)}", "type": "hang", "target": st.host}
            heal = TraceEvent(t + rng.uniform(0.0, 30.0), "*", "injector", "fault",
                              {**fault, "phase": "heal"})
            out.insert(rng.randrange(1, len(out) + 1), heal)
            ev = TraceEvent(t, "*", "injector", "fault", {**fault, "phase": "start"})
        elif what == 4:
            ev = TraceEvent(t, st.host, f"{st.host}/main", "job_done", {"step": 1})
        elif what == 5:
            ev = TraceEvent(t, coord, f"{coord}/main", "proc_start", {})
        else:
            ev = TraceEvent(t, st.host, st.proc, "step", {"round": 0, "step": i})
        out.insert(rng.randrange(1, len(out) + 1), ev)
    out.append(raw[-1])
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("path", ["scenarios/torchelastic/worker_crash.yaml",
                                  "scenarios/torchelastic/partition_heals.yaml",
                                  "scenarios/horovod/hosts_added_and_removed.yaml",
                                  "scenarios/scale_down.yaml"])
def test_native_reading_of_odd_traces_equals_the_expanded_one(path: str, seed: int) -> None:
    sc = load_scenario(ROOT / path)
    hist, _, result = simulate(sc, sc.seed)
    raw = _perturbed(hist.raw, seed)
    end = {"exit_codes": result.exit_codes, "hung": result.hung, "end_time": result.end_time}
    native = _readings(sc, raw, History(raw), end)
    stepwise = _readings(sc, raw, list(expand_stretches(raw)), end)
    for key in stepwise:
        assert json.dumps(native[key], default=str) == json.dumps(stepwise[key], default=str), key


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("path", ["scenarios/torchelastic/worker_crash.yaml",
                                  "scenarios/horovod/hosts_added_and_removed.yaml"])
def test_history_answers_as_the_expanded_view(path: str, seed: int) -> None:
    sc = load_scenario(ROOT / path)
    raw = _perturbed(simulate(sc, sc.seed)[0].raw, seed)
    hist, expanded = History(raw), list(expand_stretches(raw))
    assert list(hist) == expanded and hist.size == len(expanded)
    for kinds in (("step",), ("coll_enter", "rdzv_done"), ("fault", "coll_done", "job_done")):
        assert hist.of(*kinds) == [e for e in expanded if e.kind in kinds]
    assert hist.plain == [e for e in expanded if e.kind not in ("coll_enter", "coll_done",
                                                               "step")
                          or any(e is p for p in raw)]
    import random

    rng = random.Random(seed)
    for _ in range(30):
        t = rng.choice(expanded).t + rng.choice((0.0, -1e-9, 1e-9))
        got = hist.first_from(t)
        assert got == next((e for e in expanded if e.t >= t), None)
        made = hist.made_first_from(t)
        assert [e for _, e in made] == ([got] if got is not None and not any(
            got is p for p in raw) else [])
        b = t + rng.choice((0.0, 0.05, 1.0, 30.0))
        for kind in ("step", "coll_enter", "job_done"):
            assert hist.occurs(kind, t, b) == any(
                e.kind == kind and t <= e.t <= b for e in expanded), (kind, t, b)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("path", ["scenarios/torchelastic/worker_crash.yaml",
                                  "scenarios/horovod/hosts_added_and_removed.yaml"])
def test_the_runs_of_entries_are_the_entries(path: str, seed: int) -> None:
    """History.entries: the coll_enter events that summaries stand for, each summary's as
    one run of one process into one group's consecutive collectives: with the recorded
    ones, every coll_enter of the expanded view, once."""
    sc = load_scenario(ROOT / path)
    raw = _perturbed(simulate(sc, sc.seed)[0].raw, seed)
    hist, expanded = History(raw), list(expand_stretches(raw))
    runs = hist.entries()
    assert runs is not None
    made = [(r.proc, str(r.group), seq, r.op, r.nbytes) for r in runs
            for seq in range(r.seq, r.end)]
    made += [(e.proc, str(e.get("group")), e.get("seq"), e.get("op"), e.get("nbytes"))
             for e in hist.recorded("coll_enter")]
    assert sorted(made) == sorted((e.proc, str(e.get("group")), e.get("seq"), e.get("op"),
                                   e.get("nbytes")) for e in expanded if e.kind == "coll_enter")
    split = any(hist.interrupted(st) for st in hist.stretches if len(st))
    assert (hist.entries(whole=True) is None) == split


def test_the_checks_reading_is_one_event_for_each_at_its_place() -> None:
    sc = load_scenario(ROOT / "scenarios/horovod/hosts_added_and_removed.yaml")
    hist = History(simulate(sc, sc.seed)[0].raw)
    read = hist.neutral
    assert read is not hist and read.neutral is read and hist.neutral is read
    assert read.keys == hist.keys and len(read) == len(hist) and read.size == hist.size
    assert [recorded(e) for e in read] == list(hist)
    assert {e.kind for e in read if e is not recorded(e)} >= {"epoch_assigned", "offered"}


@pytest.mark.parametrize("path", ["scenarios/scale_down.yaml",
                                  "scenarios/torchelastic/worker_crash.yaml",
                                  "scenarios/horovod/hosts_added_and_removed.yaml"])
def test_judging_a_passing_run_never_expands_its_summaries(path: str) -> None:
    """The checks, the contract and the metrics read a passing run's training summaries
    natively: the step-by-step view (a few events per step per worker, most of a long
    run's judging time) is never made. A check that walks the whole trace to find one
    early event would make it (stop 23's clock_sync scan did)."""
    sc = load_scenario(ROOT / path)
    hist, _, result = simulate(sc, sc.seed)
    native = History(hist.raw)
    assert native.stretches
    checks = run_checks(native)
    assert all(c.ok for c in checks), [c.name for c in checks if not c.ok]
    judge(native, checks)
    body = History(hist.raw[:-1])
    compute(body, sc.workload.steps, result.exit_codes, result.hung, result.end_time,
            sc.workload.batch_size)
    assert native._expanded is None and body._expanded is None
    assert native.neutral._expanded is None  # nor the checks' reading of them
