"""A run's output directory: one run at a time, never a user's files clobbered, names that
stay inside runs/, and a set of files that is the earlier run's or the new one's, never a
mix, whenever the writer dies; a report that cannot be written leaves the verdict alone."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.cli import main
from elastic_sim.outdir import MANIFEST, safe_component
from tests.procs import reaped

ROOT = Path(__file__).resolve().parent.parent
SCALE_DOWN = str(ROOT / "scenarios" / "scale_down.yaml")


def run(out: Path | None, *extra: str, scenario: str = SCALE_DOWN) -> int:
    args = ["run", scenario, "--quiet", "--no-report", *extra]
    return main(args if out is None else [*args, "--out", str(out)])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its sha256 (what "untouched" compares)."""
    return {p.relative_to(root).as_posix(): sha(p) for p in sorted(root.rglob("*"))
            if p.is_file()}


def consistent_seed(out: Path) -> int:
    """The seed of the one complete run ``out`` holds; fails if its files are a mix."""
    manifest = json.loads((out / MANIFEST).read_text())["files"]
    on_disk = snapshot(out)
    assert {k: on_disk.get(k) for k in manifest} == manifest
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trace"]["sha256"] == sha(out / "trace.jsonl")
    start = json.loads((out / "trace.jsonl").read_text().splitlines()[0])
    assert start["data"]["seed"] == summary["seed"]
    return int(summary["seed"])


# -- one run at a time ------------------------------------------------------------------

PAUSED_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import elastic_sim.pipeline as pipeline
    from elastic_sim.cli import main

    gate = Path(sys.argv[2])
    record = pipeline.record

    def paused(*args, **kwargs):  # the run holds its --out and waits for the test
        Path(str(gate) + ".waiting").touch()
        while not gate.exists():
            time.sleep(0.05)
        return record(*args, **kwargs)

    pipeline.record = paused
    sys.exit(main(["run", sys.argv[1], "--out", sys.argv[3], "--quiet", "--no-report",
                   "--seed", "4"]))
""")


def test_a_second_run_on_the_same_out_exits_2_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, gate = tmp_path / "out", tmp_path / "gate"
    first = subprocess.Popen([sys.executable, "-c", PAUSED_RUN, SCALE_DOWN, str(gate), str(out)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with reaped(first):
        deadline = time.monotonic() + 120
        while not Path(f"{gate}.waiting").exists() and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        assert run(out, "--seed", "9") == 2
        err = capsys.readouterr().err
        assert "in use by another run" in err and f"pid {first.pid}" in err
        gate.touch()
        _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    assert consistent_seed(out) == 4  # the holder's run, whole


# -- what --out refuses ----------------------------------------------------------------

def test_out_refuses_the_root_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Path("/"), "--force") == 2
    assert "is the root directory" in capsys.readouterr().err
    assert main(["explore", SCALE_DOWN, "--budget", "1", "--out", "/"]) == 2
    assert "is the root directory" in capsys.readouterr().err


def test_out_refuses_the_home_directory_and_leaves_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    assert run(home, "--force") == 2
    assert "is your home directory" in capsys.readouterr().err
    assert snapshot(home) == {".bashrc": sha(home / ".bashrc")}


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_out_refuses_a_users_non_empty_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], force: list[str]
) -> None:
    mine = tmp_path / "mine"
    (mine / "real" / "keep").mkdir(parents=True)
    (mine / "real" / "keep" / "data.bin").write_bytes(b"\x00" * 10)
    (mine / "notes.txt").write_text("mine\n")
    before = snapshot(mine)
    assert run(mine, *force) == 2
    assert "not empty and not an earlier run's output" in capsys.readouterr().err
    assert snapshot(mine) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_an_earlier_runs_output_is_replaced_only_with_force_keeping_the_users_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", SCALE_DOWN, "--quiet", "--out", str(out), "--seed", "1"]) == 0
    assert (out / "report.html").exists()
    (out / "notes.txt").write_text("mine\n")
    before = snapshot(out)
    assert run(out, "--seed", "2") == 2
    assert "pass --force" in capsys.readouterr().err
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "out"]
    assert run(out, "--seed", "2", "--force") == 0
    assert consistent_seed(out) == 2
    # The earlier run's reports are gone (the new run wrote none); the user's file stays.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST, "notes.txt", "summary.json", "trace.jsonl"])
    assert (out / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "out"]


def test_force_keeps_a_users_file_inside_a_folder_the_tool_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(out, "--seed", "1") == 0
    manifest = json.loads((out / MANIFEST).read_text())
    (out / "real" / "mine").mkdir(parents=True)  # where a real run keeps its processes' files
    (out / "real" / "mine" / "notes.txt").write_text("mine\n")
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert run(out, "--seed", "2", "--force") == 0
    assert (out / "real" / "mine" / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("name", ["../../escaped", "/abs/dir", "..", "a/../../b"])
def test_a_scenario_name_stays_inside_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = tmp_path / "deep" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    sc = work / "sc.yaml"
    sc.write_text(Path(SCALE_DOWN).read_text().replace("name: scale_down",
                                                      f"name: {json.dumps(name)}"))
    assert run(None, scenario=str(sc)) == 0
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name == "trace.jsonl") == \
        ["trace.jsonl"]
    (trace,) = work.rglob("trace.jsonl")
    assert trace.parent.parent == work / "runs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]


def test_safe_component_is_one_plain_path_component() -> None:
    for name in ["../../x", "/abs/dir", "..", ".", "", "a/b\\c", ".hidden", "ok-name_1.2"]:
        safe = safe_component(name)
        assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
        assert not safe.startswith(".")
    assert safe_component("ok-name_1.2") == "ok-name_1.2"


def test_a_scenario_real_mode_refuses_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = tmp_path / "link.yaml"
    sc.write_text(Path(SCALE_DOWN).read_text().replace(
        "{id: crash-h3, type: crash, host: h3, at: 2.55}",
        "{type: link, a: h0, b: h1, at: 1, duration: 1, loss: 0.5}"))
    monkeypatch.chdir(tmp_path)
    assert run(tmp_path / "out", "--mode", "real", scenario=str(sc)) == 2
    assert "run with --mode sim" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml"]


# -- a consistent set, whatever moment the writer dies at ------------------------------

KILL_AT = textwrap.dedent("""
    import builtins, io, os, pathlib, shutil, signal, sys
    import elastic_sim.outdir as outdir
    from elastic_sim.cli import main

    watched, kill_at = sys.argv[1], int(sys.argv[2])
    count = 0

    def step(path):
        global count
        if str(os.fspath(path)).startswith(watched):
            if count == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            count += 1

    def wrap(fn, n_paths=1, writes=lambda *a, **k: True):
        def wrapped(*args, **kwargs):
            if writes(*args, **kwargs):
                for p in args[:n_paths]:
                    if isinstance(p, (str, bytes, os.PathLike)):
                        step(os.fsdecode(p))
            return fn(*args, **kwargs)
        return wrapped

    def writing(file, mode="r", *a, **k):
        return any(c in mode for c in "wax+")

    builtins.open = wrap(builtins.open, writes=writing)
    io.open = builtins.open
    for name in ("replace", "rename", "unlink", "rmdir", "mkdir", "ftruncate"):
        setattr(os, name, wrap(getattr(os, name), n_paths=2))
    os.open = wrap(os.open, writes=lambda p, flags, *a, **k: flags & (os.O_WRONLY | os.O_RDWR))
    shutil.rmtree = wrap(shutil.rmtree)
    outdir._exchange = wrap(outdir._exchange, n_paths=2)
    code = main(["run", sys.argv[3], "--out", sys.argv[4], "--quiet", "--force", "--seed", "2"]
                + sys.argv[5:])
    print("STEPS", count)
    sys.exit(code)
""")


def kill_at(step: int, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", KILL_AT, str(out.parent), str(step),
                           SCALE_DOWN, str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def kill_at_every_step(tmp_path: Path, reports: bool) -> list[int]:
    """Kill a run replacing seed 1's output at each of its write steps in turn; after each
    kill the directory holds seed 1's set or seed 2's, and a later run works. Returns the
    seed found after each step."""
    extra = [] if reports else ["--no-report"]
    template = tmp_path / "template" / "out"
    assert main(["run", SCALE_DOWN, "--quiet", "--out", str(template), "--seed", "1",
                 *extra]) == 0
    found = []
    step = 0
    while True:
        case = tmp_path / f"k{step}"
        out = case / "out"
        case.mkdir()
        subprocess.run(["cp", "-a", str(template), str(out)], check=True)
        proc = kill_at(step, out, *extra)
        if proc.returncode == 0:
            assert "STEPS" in proc.stdout and int(proc.stdout.split()[-1]) == step
            assert consistent_seed(out) == 2
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        found.append(consistent_seed(out))
        assert run(out, "--seed", "3", "--force") == 0  # the stale parts are cleared
        assert consistent_seed(out) == 3
        assert sorted(p.name for p in case.iterdir()) == [".out.lock", "out"]
        step += 1
        assert step < 300, "the run never finished"
    return found


@pytest.mark.slow  # a fresh interpreter per write step: ~20 s of CPU
def test_killed_at_every_write_step_the_output_is_one_whole_run(tmp_path: Path) -> None:
    found = kill_at_every_step(tmp_path, reports=False)
    assert len(found) >= 5  # lock, staging, trace, summary, manifest, swap...
    # The earlier set until the swap, the new one from then on.
    assert found[0] == 1 and found[-1] == 2 and found == sorted(found)


@pytest.mark.slow
def test_killed_at_every_write_step_with_reports_the_output_is_one_whole_run(
    tmp_path: Path,
) -> None:
    found = kill_at_every_step(tmp_path, reports=True)
    assert len(found) >= 10
    assert found[0] == 1 and found[-1] == 2 and found == sorted(found)


# -- reports that cannot be written ----------------------------------------------------

def test_a_report_that_cannot_be_written_is_a_warning_and_the_verdict_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import elastic_sim.reports.render as render

    def full_disk(*args: Any, **kwargs: Any) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(render, "render_html", full_disk)
    out = tmp_path / "out"
    assert main(["run", SCALE_DOWN, "--quiet", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("PASS")
    assert "warning: reports not written" in captured.err and "No space left" in captured.err
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST, "summary.json", "trace.jsonl"])
    assert consistent_seed(out) == 0
    assert json.loads((out / "summary.json").read_text())["verdict"] == "pass"
