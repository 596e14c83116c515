"""A run whose hosts cannot start (their interpreter fails before it is ready) is exit 2
with one line saying which host and the error it died of: this machine's setup, not an
internal error, and nothing of the run is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.real]


def test_a_host_that_fails_to_start_is_exit_2_with_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("this torch is broken")\n')
    env = {**os.environ, "PYTHONPATH": str(broken.parent), "TMPDIR": str(tmp_path)}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "elastic_sim", "run", "scale_down", "--mode", "real",
         "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, lines
    assert "could not start" in lines[0] and "ImportError: this torch is broken" in lines[0]
    assert "before it was ready" in lines[0]
    assert "traceback" not in lines[0] and "internal error" not in lines[0]
    assert not out.exists()
    assert not list(tmp_path.glob("elastic-sim-traceback-*"))
