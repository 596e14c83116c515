"""``elastic-sim compare``: what counts as a disagreement, its exit codes and outputs (sim
only here; the torchrun acceptance runs are in the report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from elastic_sim.compare.collect import (
    RunFigures,
    judge,
    reference_start_up,
    start_ups,
    summarise,
)
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
WORKER_CRASH = str(ROOT / "scenarios/torchelastic/worker_crash.yaml")


def fig(mode: str, members: list[list[str]], recovery: float | None, outcome: str = "completed",
        ) -> RunFigures:
    f = RunFigures(mode, 0, "x", 0, outcome, members)
    f.recoveries = {"f1": {"recovery_s": recovery, "detect": 0.1}}
    f.checks = {"limits": "pass"}
    return f


def compare(sim: list[RunFigures], tr: list[RunFigures], tol: float = 0.25) -> list[str]:
    sc = load_scenario(WORKER_CRASH)
    sums = {"sim": summarise("sim", sim), "torchrun": summarise("torchrun", tr)}
    return judge(sc, ["sim", "torchrun"], sums, tol).disagreements


def test_agreement_within_tolerance() -> None:
    a = [["h0", "h1"], ["h0", "h1"]]
    assert compare([fig("sim", a, 2.7)], [fig("torchrun", a, 2.9), fig("torchrun", a, 3.5),
                                          fig("torchrun", a, 2.2)]) == []


def test_recovery_outside_tolerance_is_flagged() -> None:
    a = [["h0", "h1"], ["h0", "h1"]]
    out = compare([fig("sim", a, 2.0)], [fig("torchrun", a, 2.9)])
    assert len(out) == 1 and out[0].startswith("recovery f1: sim 2.00 s vs torchrun 2.90 s")
    assert compare([fig("sim", a, 2.0)], [fig("torchrun", a, 2.9)], tol=0.5) == []
    assert compare([fig("sim", a, None)], [fig("torchrun", a, 2.9)]) == [
        "recovery f1: sim not recovered vs torchrun 2.90 s"]


def test_membership_and_outcome_differences_are_flagged() -> None:
    out = compare([fig("sim", [["h0", "h1", "h2"], ["h0", "h1"]], 3.0, "failed")],
                  [fig("torchrun", [["h0", "h1", "h2"], ["h0", "h2"]], 3.0)])
    assert out == ["membership: sim [h0,h1,h2] -> [h0,h1] vs torchrun [h0,h1,h2] -> [h0,h2]",
                   "outcome: sim failed vs torchrun completed"]


def _totals(mode: str, stalled: float, end: float, lost: int, sync: float = 1.3
            ) -> RunFigures:
    f = fig(mode, [["h0", "h1", "h2"], ["h0", "h1"]], 5.0)
    f.recoveries["f1"].update({"sync": sync, "stall_s": 2.0, "lost_steps": 3})
    f.stalled_s, f.end_s, f.lost_steps = stalled, end, lost
    return f


def test_stalls_end_and_lost_steps_are_judged_against_the_tolerance() -> None:
    # partition_heals as the issue found it: the sim stalls 7.9 s and ends at 22.9 s, real
    # mode stalls 13.2 s (+67 %) and ends at 32.3 s.
    sc = load_scenario(WORKER_CRASH)
    sums = {"sim": summarise("sim", [_totals("sim", 7.9, 22.9, 5)]),
            "real": summarise("real", [_totals("real", 13.2, 32.3, 5)])}
    c = judge(sc, ["sim", "real"], sums, 0.25, 0.5)
    assert c.disagreements == ["stalled: sim 7.90 s vs real 13.20 s, -40%",
                               "job end: sim 22.90 s vs real 32.30 s, -29%"]
    assert c.structural == []  # timing only: what a loaded machine explains
    sums["sim"] = summarise("sim", [_totals("sim", 12.0, 30.0, 7)])  # within ±25 %
    assert judge(sc, ["sim", "real"], sums, 0.25, 0.5).disagreements == [
        "lost steps: sim 7 vs real 5"]  # beyond the tolerance and one step


def test_a_start_up_difference_names_its_likely_cause_and_the_option() -> None:
    sc = load_scenario(WORKER_CRASH)
    sums = {"sim": summarise("sim", [_totals("sim", 7.9, 22.9, 5, sync=1.3)]),
            "real": summarise("real", [_totals("real", 7.9, 22.9, 5, sync=2.9)])}
    c = judge(sc, ["sim", "real"], sums, 0.25, 0.5)
    assert c.disagreements == ["sync f1: sim 1.30 s vs real 2.90 s, -55% "
                               "(tolerance ±25%, 0.5 s)"]
    (hint,) = c.hints
    assert "worker start-up" in hint and "--sim-start-up reference" in hint


def test_n_a_stays_n_a(tmp_path: Path) -> None:
    assert main(["compare", "scale_down", "--modes", "sim", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    checks = doc["summaries"]["sim"]["checks"]
    assert checks["master_agreement"] == "n/a: nothing to check"  # the static protocol
    summary = json.loads((tmp_path / "sim" / "run0" / "summary.json").read_text())
    na = {c["name"] for c in summary["checks"] if c["status"] == "n/a"}
    assert na and {n for n, v in checks.items() if v.startswith("n/a")} == na


def test_membership_and_outcome_are_structural_disagreements() -> None:
    sc = load_scenario(WORKER_CRASH)
    sums = {"sim": summarise("sim", [fig("sim", [["h0", "h1"]], 3.0, "failed")]),
            "torchrun": summarise("torchrun", [fig("torchrun", [["h0"]], 9.0)])}
    c = judge(sc, ["sim", "torchrun"], sums, 0.25)
    assert c.structural == ["membership: sim [h0,h1] vs torchrun [h0]",
                            "outcome: sim failed vs torchrun completed"]
    assert len(c.disagreements) == 3  # and the recovery's time


def test_runs_of_one_mode_that_differ_are_flagged() -> None:
    a, b = [["h0", "h1"]], [["h0", "h1"], ["h0"]]
    out = compare([fig("sim", a, 3.0), fig("sim", b, 3.0), fig("sim", a, 3.0)],
                  [fig("torchrun", a, 3.0)])
    assert out == ["sim: its runs formed different membership sequences: [h0,h1] / "
                   "[h0,h1] -> [h0]"]


def test_compare_cli_writes_its_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    code = main(["compare", WORKER_CRASH, "--modes", "sim", "--runs", "2", "--out",
                 str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    sim = doc["summaries"]["sim"]
    assert doc["agree"] and len(sim["runs"]) == 2
    assert sim["membership"] == [["h0", "h1"], ["h0", "h1"]]
    rec = sim["recoveries"]["kill-h1-worker"]
    assert set(rec) == {"recovery_s", "detect", "rendezvous", "sync", "first_step",
                        "stall_s", "lost_steps"} and rec["recovery_s"] > 0
    page = (tmp_path / "compare.html").read_text()
    assert "<svg" in page and "kill-h1-worker" in page
    assert '<span class="badge pass">AGREE</span>' in page
    assert "<style>" in page and ".badge{" in page  # report.html's look
    assert "2[h0 h1] -> 2[h0 h1]" in capsys.readouterr().out


@pytest.mark.parametrize("argv, field", [
    (["--modes", "sim,bogus"], "--modes"),
    (["--modes", "sim,sim"], "--modes"),
    (["--runs", "0"], "--runs"),
    (["--tolerance", "-1"], "--tolerance"),
    (["--modes", "sim", "--script", "train.py"], "--script"),
    (["--modes", "sim", "--launcher", "slurm"], "--launcher"),
    (["--modes", "sim,torchrun", "--launcher", "netns", "--ray"], "--launcher"),
    (["--modes", "sim,torchrun", "--launcher", "netns", "--nodes", "0"], "--nodes"),
    (["--modes", "sim", "--sim-start-up", "-1"], "--sim-start-up"),
    (["--modes", "torchrun", "--sim-start-up", "2"], "--sim-start-up"),
    (["--modes", "sim", "--sim-start-up", "reference"], "--sim-start-up"),
    (["--modes", "sim", "--sim-start-up", "soon"], "--sim-start-up"),
])
def test_compare_bad_input_exits_2_with_one_line(argv: list[str], field: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", WORKER_CRASH, "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "o").exists()


def test_torchrun_mode_refuses_other_protocols(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "scenarios/horovod/single_rank_failure.yaml")
    assert main(["run", path, "--mode", "torchrun"]) == 2
    err = capsys.readouterr().err
    assert "protocol.name" in err and "torchelastic" in err


def test_compare_through_slurm_outside_an_allocation_prints_the_batch_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    out = tmp_path / "o"
    assert main(["compare", WORKER_CRASH, "--modes", "sim,torchrun", "--runs", "2",
                 "--launcher", "slurm", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "inside a Slurm allocation" in captured.err
    script = captured.out
    assert "#SBATCH --ntasks=2" in script
    assert (f"elastic-sim compare {WORKER_CRASH} --modes sim,torchrun --runs 2 --launcher "
            f"slurm --bind 0.0.0.0 --out {out}") in script
    assert not out.exists()


def test_sim_start_up_replaces_the_scenarios_worker_start(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    args = ["compare", WORKER_CRASH, "--modes", "sim", "--runs", "1"]
    assert main([*args, "--out", str(tmp_path / "default")]) == 0
    assert main([*args, "--sim-start-up", "2.5", "--out", str(tmp_path / "slow")]) == 0
    assert "sim worker start-up: 2.500 s (given on the command line; the scenario's: 1.3 s)" \
        in capsys.readouterr().out
    default, slow = (json.loads((tmp_path / d / "compare.json").read_text())
                     for d in ("default", "slow"))
    assert "sim_start_up" not in default
    assert slow["sim_start_up"] == {"seconds": 2.5, "source": "given on the command line",
                                    "scenario": 1.3}

    def sync(doc: dict[str, Any]) -> float:
        return float(doc["summaries"]["sim"]["recoveries"]["kill-h1-worker"]["sync"])

    assert sync(default) == pytest.approx(1.3, abs=0.01)
    assert sync(slow) == pytest.approx(2.5, abs=0.01)


def test_measured_start_up_is_an_import_of_torch() -> None:
    pytest.importorskip("torch")
    from elastic_sim.compare.startup import measure

    seconds = measure(2, rounds=1)
    assert 0.2 < seconds < 120


def test_start_up_is_read_from_restarted_workers() -> None:
    from elastic_sim.pipeline import simulate

    sc = load_scenario(WORKER_CRASH)
    events, _, _ = simulate(sc, sc.seed)
    # round 0's start is not a restart; each host's worker of round 1 took process_start
    assert start_ups(events) == [1.3, 1.3]
    slow = sc.model_copy(update={"cluster": sc.cluster.model_copy(
        update={"process_start": 2.0})})
    assert start_ups(simulate(slow, sc.seed)[0]) == [2.0, 2.0]
    runs = [fig("torchrun", [], 3.0), fig("torchrun", [], 3.0), fig("torchrun", [], 3.0)]
    for r, ups in zip(runs, ([2.5, 2.9], [3.1], []), strict=True):
        r.start_ups = ups
    assert reference_start_up(summarise("torchrun", runs)) == 2.9
    assert reference_start_up(summarise("torchrun", runs[2:])) is None


def test_a_second_compare_into_the_same_out_starts_each_run_afresh(tmp_path: Path) -> None:
    """An earlier run's files in a run directory are removed before the run (torchrun
    mode's per-worker logs of an earlier compare were read into the new run's trace); a
    non-empty directory that is not a run directory is refused, not emptied."""
    from elastic_sim.compare.collect import fresh_run_dir
    from elastic_sim.errors import ScenarioError

    run = tmp_path / "torchrun" / "run0"
    (run / "torchrun" / "workers").mkdir(parents=True)
    (run / "torchrun" / "workers" / "worker-h0-123.jsonl").write_text("{}\n")
    (run / "trace.jsonl").write_text("")
    fresh_run_dir(run)
    assert not run.exists()
    fresh_run_dir(run)  # absent: nothing to do
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ScenarioError, match="not a run directory"):
        fresh_run_dir(mine)
    assert (mine / "notes.txt").read_text() == "keep me"
