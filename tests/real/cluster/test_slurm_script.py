"""Outside a Slurm allocation, ``--launcher slurm`` prints the batch script to submit."""

from __future__ import annotations

import os
from pathlib import Path

from tests.real.cluster.conftest import SCALE_DOWN, cli


def test_outside_an_allocation_it_prints_the_sbatch_script_and_runs_nothing(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = tmp_path / "out"
    done = cli("run", str(SCALE_DOWN), "--mode", "real", "--launcher", "slurm", "--out",
               str(out), env=env, timeout=120)
    assert done.returncode == 2
    assert done.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --ntasks=3" in done.stdout
    assert f"elastic-sim run {SCALE_DOWN} --mode real --launcher slurm" in done.stdout
    assert "inside a Slurm allocation" in done.stderr
    assert not out.exists()


def test_a_launcher_needs_real_mode(tmp_path: Path) -> None:
    done = cli("run", str(SCALE_DOWN), "--launcher", "netns", "--out", str(tmp_path / "o"),
               timeout=120)
    assert done.returncode == 2 and "--launcher netns needs --mode real" in done.stderr
