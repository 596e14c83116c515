"""Code trees to measure against each other in one run: this checkout (the installed,
editable package) and a baseline commit, built into a wheel and installed into a folder
of its own (the repository's folders map onto ``elastic_sim.*`` only when installed).

A child interpreter runs one tree's code: ``python -c CODE`` with :func:`env_for` the
tree's environment and a neutral working directory (never the repository, whose
``elastic_sim/`` folder would shadow a baseline's). :data:`RUN_SIM` is the snippet that
runs a scenario as the command line does, whichever API the tree has (a run pipeline
since the house issue; ``runner.run_scenario`` before).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ISOLATE = r"""
import os as _os, sys as _sys
if _os.environ.get("PYTHONPATH"):  # a tree installed there: this checkout's editable
    # install must not fill in what that tree lacks
    _sys.meta_path[:] = [f for f in _sys.meta_path
                         if "__editable__" not in getattr(f, "__module__", "")]
"""
"""First lines of a child's code: a tree installed on ``PYTHONPATH`` imports its own
modules only."""

RUN_SIM = ISOLATE + r"""
try:
    from elastic_sim.pipeline import execute as _execute
    from elastic_sim.spec import compile_spec as _compile

    def run_sim(sc, out_dir):
        return _execute(_compile(sc, seed=0), out_dir)

    def patch_runtime(wrap):
        import elastic_sim.backends.sim as _b
        _b.SimBackend.run = wrap(_b.SimBackend.run)
except ImportError:  # a tree from before the run pipeline
    from elastic_sim import runner as _runner

    def run_sim(sc, out_dir):
        return _runner.run_scenario(sc, seed=0, mode="sim", out_dir=out_dir)

    def patch_runtime(wrap):
        _runner._run_runtime = wrap(_runner._run_runtime)
"""
"""Defines ``run_sim(scenario, out_dir) -> report`` and ``patch_runtime(wrap)`` (wraps
the function that runs the simulation itself, for timing it)."""


def install(ref: str, into: Path) -> Path:
    """Commit ``ref`` built into a wheel and installed under ``into``; the folder to put
    on ``PYTHONPATH`` for its code."""
    src = into / "src"
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(src), ref], cwd=ROOT,
                   check=True, capture_output=True)
    try:
        return install_tree(src, into)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT,
                       capture_output=True, check=False)


def install_tree(src: Path, into: Path) -> Path:
    """The source tree ``src`` built into a wheel and installed in ``into / "site"``;
    that folder."""
    site = into / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(into / "dist"), str(src)],
                   check=True, capture_output=True)
    (whl,) = (into / "dist").glob("elastic_sim-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(site), str(whl)], check=True, capture_output=True)
    return site


def env_for(site: Path | None) -> dict[str, str]:
    """The environment of a child running the tree installed in ``site`` (None: this
    checkout, as installed in this interpreter's environment)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return env
