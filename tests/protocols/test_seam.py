"""protocols/ is written against the package protocols/api/ only: it imports no runtime."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"simpy", "asyncio", "networkx", "torch", "threading", "socket", "time", "random"}
# Inside the namespace, protocols may import only protocols.
ALLOWED_IN_NAMESPACE = "elastic_sim.protocols"
RNG_TYPE = Path("protocols/api/runtime.py")
"""The one module that may import ``random``: it defines Runtime.rng's type."""


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_protocol_sources_import_no_runtime() -> None:
    offenders = []
    files = sorted((ROOT / "protocols").rglob("*.py"))
    assert len(files) >= 5
    for f in files:
        for line, mod in _imports(f):
            top = mod.split(".")[0]
            if top == "random" and f.relative_to(ROOT) == RNG_TYPE:
                continue  # the type of Runtime.rng; protocols draw only from rt.rng
            outside = top == "elastic_sim" and not (
                mod == ALLOWED_IN_NAMESPACE or mod.startswith(ALLOWED_IN_NAMESPACE + "."))
            if top in FORBIDDEN or outside:
                offenders.append(f"{f.relative_to(ROOT)}:{line} imports {mod}")
    assert offenders == []


def test_importing_every_protocol_loads_no_runtime_module() -> None:
    mods = sorted(
        "elastic_sim." + ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "protocols").rglob("*.py")
    )
    mods = [m.removesuffix(".__init__") for m in mods]
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('simpy', 'asyncio', 'networkx', 'torch') or (m.startswith('elastic_sim.') "
        "and not m.startswith('elastic_sim.protocols')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_the_sim_needs_no_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"  # importing torch now raises ImportError
        "from elastic_sim.cli import main\n"
        "rc = main(['run', 'scenarios/scale_down.yaml', '--quiet', '--out', sys.argv[1]])\n"
        "sys.exit(rc)\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", code, tmp], cwd=ROOT, capture_output=True,
                             text=True)
    assert out.returncode == 0, out.stdout + out.stderr
