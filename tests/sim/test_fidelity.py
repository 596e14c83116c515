"""Fast vs fine fidelity: the sim's training stretches (sim/stretch.py) and polled waits
(Runtime.poll) change how many events a run costs, never what happens.

On a scenario and seed both fidelities give the same trace once the fast run's
``train_steps`` summaries are expanded (every event, exact time, same multiset: the
bound is zero), hence the same membership sequence, outcome, check verdicts and
recovery/lost-step figures, which are asserted on their own as well; and each is
deterministic. The normal lane runs a representative subset (every protocol, the
torchelastic scenarios whose faults split a stretch in each phase, found reproducers);
``-m slow`` runs every shipped scenario and every found/ reproducer.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.checks import run_checks
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import Scenario, build_world, load_scenario, parse_scenario
from elastic_sim.sim.run import run as run_sim
from elastic_sim.trace import STRETCH, TraceEvent, encode

ROOT = Path(__file__).resolve().parents[2]
ALL = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").rglob("*.yaml"))
QUICK = [
    "scenarios/torchelastic/scale_down.yaml",
    "scenarios/torchelastic/worker_crash.yaml",
    "scenarios/torchelastic/partition_heals.yaml",
    "scenarios/torchelastic/hot_spare_takes_over.yaml",
    "scenarios/torchelastic/clock_skew.yaml",
    "scenarios/torchelastic/preemption.yaml",
    "scenarios/found/torchelastic/stale_bootstrap_master_after_rank0_hang.yaml",
    "scenarios/found/torchelastic/hot_spare_wait_list_livelock.yaml",
    "scenarios/scale_down.yaml",
    "scenarios/horovod/single_rank_failure.yaml",
    "scenarios/horovod/spark_auto_scale_up.yaml",
]


def _with(sc: Scenario, fidelity: str) -> Scenario:
    return sc.model_copy(update={"fidelity": fidelity})


def _facts(sc: Scenario, seed: int) -> dict[str, Any]:
    """What a user reads off a run: membership, outcome, verdicts, recovery, lost steps,
    and every event (expanded), as a sorted multiset with exact times."""
    events, m, result = simulate(sc, seed)
    return {
        "outcome": m.outcome,
        "members": [r.members for r in m.rounds],
        "world_sizes": m.world_sizes,
        "steps_done": m.steps_done,
        "lost_steps": m.lost_steps,
        "recoveries": [dataclasses.asdict(r) for r in m.recoveries],
        "max_recovery_s": m.max_recovery_s,
        "end_time": result.end_time,
        "exit_codes": result.exit_codes,
        "checks": {c.name: (c.ok, len(c.violations), c.checked) for c in run_checks(events)},
        "events": sorted((e.t, e.host, e.proc, e.kind, encode(e)) for e in events),
    }


def _raw(sc: Scenario, seed: int) -> list[TraceEvent]:
    """The run's events as the sim emits them (summaries not expanded)."""
    out: list[TraceEvent] = []
    run_sim(build_world(sc, seed), sc.fault_objects(), seed, out.append,
            tie_seed=sc.tie_seed)
    return out


def _same(sc: Scenario, seed: int) -> None:
    fine, fast = _facts(_with(sc, "fine"), seed), _facts(_with(sc, "fast"), seed)
    for key in fine:
        assert fast[key] == fine[key], key


@pytest.mark.parametrize("path", QUICK)
def test_fast_and_fine_agree(path: str) -> None:
    sc = load_scenario(ROOT / path)
    _same(sc, sc.seed)


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL)
def test_fast_and_fine_agree_everywhere(path: str) -> None:
    sc = load_scenario(ROOT / path)
    _same(sc, sc.seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 11))
def test_fast_and_fine_agree_over_seeds(seed: int) -> None:
    sc = load_scenario(ROOT / "scenarios/torchelastic/scale_down.yaml")
    _same(sc, seed)


def _scale_down(fault: dict[str, Any]) -> Scenario:
    raw = yaml.safe_load((ROOT / "scenarios/torchelastic/scale_down.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["faults"] = [fault]
    raw.pop("expect", None)
    return parse_scenario(raw, "<fidelity test>")


def _instants() -> list[float]:
    """Fault times around one step of the fault-free 3-host run (read off its fine
    trace): in the compute, at the allreduce's entry, inside it, at its end, just after."""
    sc = _scale_down({"id": "f", "at": 1000.0, "type": "crash", "host": "h2"})
    events, _, _ = simulate(_with(sc, "fine"), sc.seed)
    enter = min(e.t for e in events if e.kind == "coll_enter" and e.t > 9.0)
    done = min(e.t for e in events if e.kind == "coll_done" and e.t > enter)
    return [enter - 0.05, enter, (enter + done) / 2, done, done + 1e-9, done + 0.05]


PHASES = _instants()
FAULTS = [
    {"type": "crash", "host": "h2"},
    {"type": "crash", "host": "h0"},
    {"type": "hang", "host": "h1", "duration": 2.0},
    {"type": "hang", "host": "h1", "duration": 40.0},
    {"type": "partition", "groups": [["h0", "h1"], ["h2"]], "duration": 3.0},
    {"type": "straggler", "host": "h1", "factor": 3.0, "duration": 2.0},
    {"type": "collective", "host": "h1", "mode": "fail"},
    {"type": "collective", "host": "h2", "mode": "hang"},
    {"type": "signal", "host": "h1", "signal": "TERM", "to": "workers"},
    {"type": "wedge", "host": "h1", "activity": "main", "duration": 1.0},
    {"type": "link", "a": "h0", "b": "h1", "delay": 0.01, "duration": 2.0},
    {"type": "clock_jump", "host": "h1", "delta": 5.0},
]


@pytest.mark.parametrize("at", PHASES)
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f"{f['type']}-{f.get('host', '')}")
def test_a_fault_splits_a_stretch_where_the_fine_run_stands(fault: dict[str, Any],
                                                            at: float) -> None:
    """Each fault at each phase of a step: the split leaves every member exactly where
    the step-by-step run has it (same events, times and results)."""
    sc = _scale_down({"id": "f", "at": at, **fault})
    _same(sc, sc.seed)


def _mark_instants() -> list[float]:
    """Fault times around a checkpoint mark (a step whose end a torchelastic worker sends
    its checkpoint at, while the stretch runs on): just before its step ends, at that
    instant, just after, and in the next step's compute."""
    sc = _scale_down({"id": "f", "at": 1000.0, "type": "crash", "host": "h2"})
    events, _, _ = simulate(_with(sc, "fine"), sc.seed)
    mark = min(e.t for e in events if e.kind == "commit" and e.t > 9.0)
    enter = min(e.t for e in events if e.kind == "coll_enter" and e.t > mark)
    return [mark - 1e-9, mark, mark + 1e-9, (mark + enter) / 2]


MARK_PHASES = _mark_instants()
MARK_FAULTS = [
    {"type": "crash", "host": "h2"},
    {"type": "crash", "host": "h0"},
    {"type": "hang", "host": "h1", "duration": 2.0},
    {"type": "partition", "groups": [["h0", "h1"], ["h2"]], "duration": 3.0},
    {"type": "signal", "host": "h1", "signal": "TERM", "to": "workers"},
    {"type": "straggler", "host": "h1", "factor": 3.0, "duration": 2.0},
]


@pytest.mark.parametrize("at", MARK_PHASES)
@pytest.mark.parametrize("fault", MARK_FAULTS,
                         ids=lambda f: f"{f['type']}-{f.get('host', '')}")
def test_a_fault_at_a_checkpoint_mark_splits_where_the_fine_run_stands(
        fault: dict[str, Any], at: float) -> None:
    """A stretch runs on through the steps a worker checkpoints at; a fault at that very
    instant (before or after the checkpoint went out), just before or just after it,
    leaves every member and every checkpoint where the step-by-step run has them."""
    sc = _scale_down({"id": "f", "at": at, **fault})
    _same(sc, sc.seed)


def test_a_stretch_runs_on_through_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault-free, a torchelastic round's training is one stretch per round from its
    first step to its last (its 12 checkpoints are marks inside it), and its trace is
    the one a stretch per checkpoint interval gives: one summary per member per
    interval, each checkpoint's commit after the steps it saves."""
    from elastic_sim.sim.stretch import StretchBook

    arrivals: list[int] = []
    real = StretchBook.arrive

    def counted(self: StretchBook, *args: Any, **kw: Any) -> Any:
        arrivals.append(args[1])
        return real(self, *args, **kw)

    monkeypatch.setattr(StretchBook, "arrive", counted)
    sc = _with(load_scenario(ROOT / "scenarios/torchelastic/scale_down.yaml"), "fast")
    sc = sc.model_copy(update={"faults": []})
    raw = _raw(sc, sc.seed)
    assert arrivals == [120, 120, 120]  # one train of all 120 steps per worker
    summaries = [e for e in raw if e.kind == STRETCH]
    assert [e.data["steps"] for e in summaries] == [10] * 36
    commits = [e for e in raw if e.kind == "commit"]
    assert [e.data["step"] for e in commits] == [s for s in range(10, 121, 10) for _ in range(3)]
    for c in commits:  # recorded after the summary that ends with the step it saves
        last = max(i for i, e in enumerate(raw) if e.kind == STRETCH and e.host == c.host
                   and int(e.data["first"]) + int(e.data["steps"]) - 1 == c.data["step"])
        assert last < raw.index(c)


def test_fast_summarises_fault_free_training() -> None:
    """The fast run does use stretches: scale_down's 120 steps on 3 hosts are a few
    dozen summaries instead of three events per step per worker."""
    sc = load_scenario(ROOT / "scenarios/torchelastic/scale_down.yaml")
    fast, fine = _raw(_with(sc, "fast"), sc.seed), _raw(_with(sc, "fine"), sc.seed)
    assert not any(e.kind == STRETCH for e in fine)
    assert sum(e.kind == STRETCH for e in fast) > 0
    assert len(fast) * 4 < len(fine)


@pytest.mark.parametrize("fidelity", ["fast", "fine"])
def test_same_seed_same_trace_in_both_fidelities(fidelity: str) -> None:
    sc = _with(load_scenario(ROOT / "scenarios/torchelastic/scale_down.yaml"), fidelity)
    digests = {hashlib.sha256("".join(encode(e) for e in _raw(sc, 3)).encode()).hexdigest()
               for _ in range(2)}
    assert len(digests) == 1


def test_tie_seed_runs_step_by_step() -> None:
    """A tie seed shuffles same-time events: no stretch then (the fine order is the one
    being explored)."""
    sc = load_scenario(ROOT / "scenarios/torchelastic/scale_down.yaml")
    sc = sc.model_copy(update={"tie_seed": 5})
    assert not any(e.kind == STRETCH for e in _raw(sc, sc.seed))


def _horovod(knobs: dict[str, Any], faults: list[dict[str, Any]]) -> Scenario:
    """single_rank_failure with commits every 10 batches (its stretches span batches)."""
    raw = yaml.safe_load((ROOT / "scenarios/horovod/single_rank_failure.yaml").read_text())
    raw["protocol"]["knobs"].update(knobs)
    raw["faults"] = faults
    raw.pop("expect", None)
    return parse_scenario(raw, "<horovod fidelity test>")


HOROVOD = [
    ({"batches_per_commit": 10}, []),
    # an exit scheduled mid-way between commits: the run of batches stops before it
    ({"batches_per_commit": 10, "exit_schedule": [{"epoch": 1, "batch": 6, "ranks": [1]}]}, []),
    ({"batches_per_commit": 10, "exit_schedule": [], "host_updates_every": 4}, []),
    ({"batches_per_commit": 10, "exit_schedule": []},
     [{"id": "f", "at": 2.3, "type": "crash", "host": "127.0.0.1"}]),
    ({"batches_per_commit": 5, "exit_schedule": []},
     [{"id": "f", "at": 2.05, "type": "straggler", "host": "localhost", "factor": 3.0,
       "duration": 1.0}]),
]


@pytest.mark.parametrize("knobs,faults", HOROVOD)
def test_horovod_batches_agree(knobs: dict[str, Any], faults: list[dict[str, Any]]) -> None:
    """Horovod's batches between commits run as stretches: the same events (the lead's
    ``step`` events only), exits at the scheduled batch, faults splitting them."""
    sc = _horovod(knobs, faults)
    _same(sc, sc.seed)
    fast = _raw(_with(sc, "fast"), sc.seed)
    assert sum(e.kind == STRETCH for e in fast) > 0


def test_horovod_scheduled_exit_inside_a_commit_interval() -> None:
    """The exit at (epoch 1, batch 6) happens at the top of batch 6 (a run of batches up
    to the next commit would pass it, and the check at batch 10 would never match)."""
    sc = _horovod(*HOROVOD[1])
    events, _, _ = simulate(sc, sc.seed)
    exits = [e for e in events if e.kind == "hvd_scheduled_exit"]
    assert [(e.data["epoch"], e.data["batch"]) for e in exits] == [(1, 6)]
