#!/usr/bin/env python3
"""Strict mypy over the installed package, ``elastic_sim`` with its mapped folders.

The repository keeps ``sim/``, ``protocols/``, ... at its top and setuptools maps them onto
``elastic_sim.sim``, ``elastic_sim.protocols``, ... (``[tool.setuptools.package-dir]``);
mypy cannot follow that mapping (nor an editable install's import hook). So this lays out
the package as installed, in ``build/typecheck/elastic_sim``, out of links to the real
files (nothing tracked is a link), runs mypy there with the project's configuration, and
prints each finding under the file's path in the repository. Exits as mypy does.

    python scripts/typecheck.py [MYPY ARGS...]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: mypy's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"


def mapping() -> dict[str, str]:
    """Installed package -> folder in the repository, from pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        config = tomllib.load(fh)
    return dict(config["tool"]["setuptools"]["package-dir"])


def lay_out(dirs: dict[str, str]) -> Path:
    """``build/typecheck/elastic_sim`` as installed: links to the real files and folders."""
    shutil.rmtree(TREE / "elastic_sim", ignore_errors=True)
    top = TREE / "elastic_sim"
    top.mkdir(parents=True)
    for entry in (ROOT / dirs["elastic_sim"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in dirs.items():
        if package != "elastic_sim":
            (TREE / package.replace(".", "/")).symlink_to(ROOT / folder)
    return top


def main() -> int:
    dirs = mapping()
    lay_out(dirs)
    # Longest installed prefix first: elastic_sim/sim/... -> sim/...
    back = sorted(((p.replace(".", "/") + "/", f.rstrip("/") + "/") for p, f in dirs.items()),
                  key=lambda pf: -len(pf[0]))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "elastic_sim", *sys.argv[1:]],
        cwd=TREE, capture_output=True, text=True, check=False,
        env={**os.environ, "MYPYPATH": ""})
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"(elastic_sim/\S+?\.pyi?)(:.*)", line)
        if m:
            path = m.group(1)
            for installed, folder in back:
                if path.startswith(installed):
                    path = folder + path[len(installed):]
                    break
            line = path + m.group(2)
        print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
