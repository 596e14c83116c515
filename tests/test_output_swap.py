"""A --force run that replaces an earlier run's output never loses a user's file, whatever
moment it is stopped at (SIGKILL or Ctrl-C) while it moves the user's files into the new
set and the earlier set's out: the next run on the same directory settles what was cut
short, and the user's files are all there, unchanged."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from elastic_sim import outdir

TOOL_FILES = ("trace.jsonl", "summary.json", "real/logs/h0__main.log", "report.html")


def write_run(stage: Path, tag: str) -> None:
    """What a run writes into its staging directory."""
    for rel in TOOL_FILES:
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_text(f"{tag} {rel}\n")


def user_files(count: int) -> dict[str, str]:
    """A user's files: at the top, in their own folders and inside the tool's folder."""
    out = {}
    for i in range(count):
        where = ("", "notes/", "real/", "deep/a/b/")[i % 4]
        out[f"{where}user-{i}.txt"] = f"the user's file {i}\n"
    return out


def earlier_run_with_users_files(out: Path, files: dict[str, str]) -> None:
    with outdir.staged(out, force=True) as stage:
        write_run(stage, "run-1")
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (out / "empty-folder-of-the-user").mkdir()


def assert_nothing_lost(out: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        assert (out / rel).read_text() == text, rel
    assert (out / "empty-folder-of-the-user").is_dir()
    assert not list(out.parent.glob(out.name + ".part-*")), "a staging folder stayed"


@contextmanager
def stopped_at(step: int, how: str) -> Iterator[list[int]]:
    """Count the filesystem steps of the block; at step ``step``, stop as ``how`` says
    (``kill``: the process ends at once, as SIGKILL ends it; ``interrupt``: Ctrl-C)."""
    count = [0]
    names = ("rename", "replace", "unlink", "rmdir", "mkdir")
    saved: dict[str, Callable[..., Any]] = {n: getattr(os, n) for n in names}
    saved_exchange = outdir._exchange

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def step_then(*args: Any, **kwargs: Any) -> Any:
            if count[0] == step:
                if how == "kill":
                    os._exit(137)
                count[0] += 1
                raise KeyboardInterrupt
            count[0] += 1
            return fn(*args, **kwargs)
        return step_then

    for n in names:
        setattr(os, n, counted(saved[n]))
    outdir._exchange = counted(saved_exchange)
    try:
        yield count
    finally:
        for n in names:
            setattr(os, n, saved[n])
        outdir._exchange = saved_exchange


def replace_stopped_at(out: Path, step: int, how: str) -> int:
    """In a child process, replace ``out`` with a new run, stopped at ``step``; the
    child's exit status (0: it finished before that step)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            with stopped_at(step, how):
                with outdir.staged(out, force=True) as stage:
                    write_run(stage, "run-2")
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def publish_steps(tmp_path: Path, files: dict[str, str]) -> int:
    """How many filesystem steps a whole replacement takes (counted, not stopped)."""
    out = tmp_path / "count" / "out"
    earlier_run_with_users_files(out, files)
    with stopped_at(-1, "kill") as count:
        with outdir.staged(out, force=True) as stage:
            write_run(stage, "run-2")
    assert_nothing_lost(out, files)
    shutil.rmtree(out.parent)
    return count[0]


def stop_at_random_steps(tmp_path: Path, users: int, stops: int, seed: int) -> list[int]:
    files = user_files(users)
    total = publish_steps(tmp_path, files)
    rng = random.Random(seed)
    steps = sorted({0, 1, total - 1, *rng.sample(range(total), stops)})
    codes = []
    for i, step in enumerate(steps):
        how = ("kill", "interrupt")[i % 2]
        out = tmp_path / f"s{step}" / "out"
        earlier_run_with_users_files(out, files)
        codes.append(replace_stopped_at(out, step, how))
        with outdir.staged(out, force=True) as stage:  # the next run on the directory
            write_run(stage, "run-3")
        assert_nothing_lost(out, files)
        assert (out / "trace.jsonl").read_text() == "run-3 trace.jsonl\n"
        assert outdir.read_manifest(out) is not None
        shutil.rmtree(out.parent)
    return codes


def test_stopped_at_random_steps_of_the_swap_no_users_file_is_lost(tmp_path: Path) -> None:
    codes = stop_at_random_steps(tmp_path, users=400, stops=16, seed=34)
    assert 137 in codes and 130 in codes  # both ways of stopping were met


@pytest.mark.slow
def test_stopped_at_many_random_steps_of_the_swap_no_users_file_is_lost(
        tmp_path: Path) -> None:
    codes = stop_at_random_steps(tmp_path, users=2000, stops=50, seed=3434)
    assert codes.count(137) > 20 and codes.count(130) > 20


SWAP = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from elastic_sim import outdir
    out = Path(sys.argv[1])
    with outdir.staged(out, force=True) as stage:
        (stage / "trace.jsonl").write_text("run-2\\n")
        print("SWAPPING", flush=True)
""")


@pytest.mark.slow
def test_sigkill_at_random_moments_of_a_force_swap_loses_no_users_file(
        tmp_path: Path) -> None:
    """The adversary's check: 20,000 files of the user's beside an earlier run, SIGKILL
    at a random moment of the swap, then a run on the same directory."""
    files = user_files(20_000)
    rng = random.Random(7)
    killed = 0
    for trial in range(3):
        out = tmp_path / f"t{trial}" / "out"
        earlier_run_with_users_files(out, files)
        proc = subprocess.Popen([sys.executable, "-c", SWAP, str(out)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "SWAPPING"
        time.sleep(rng.uniform(0.0, 1.0))
        proc.send_signal(signal.SIGKILL)
        killed += proc.wait() == -signal.SIGKILL
        with outdir.staged(out, force=True) as stage:
            write_run(stage, "run-3")
        assert_nothing_lost(out, files)
        shutil.rmtree(out.parent)
    assert killed >= 2


def test_a_folder_the_run_left_empty_is_not_listed_as_a_file(tmp_path: Path) -> None:
    """The manifest lists files (a real run leaves an empty addr/ folder behind)."""
    out = tmp_path / "out"
    with outdir.staged(out, force=True) as stage:
        write_run(stage, "run-1")
        (stage / "real" / "addr").mkdir(parents=True)
    assert "real/addr" not in (outdir.read_manifest(out) or {})
    assert (out / "real" / "addr").is_dir()
