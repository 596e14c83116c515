#!/usr/bin/env python3
"""Write ``scenarios/found/mechanisms.json``: the mechanisms (``elastic_sim.mechanisms``) of
every reproducer in ``scenarios/found/``, by protocol, for the checks each declares in
``expect.violated_checks``; ``explore`` reads the file to tell a new mechanism from a
recorded one. Entries whose source is not a reproducer (a finding the folder's README
records without one) are kept as they are.

    python scripts/found_mechanisms.py [--check]

``--check`` writes nothing and exits 1 when the file is not what the reproducers give.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FOUND = ROOT / "scenarios" / "found"
sys.path.insert(0, str(ROOT))


def reproducer_mechanisms(rel: str) -> tuple[str, list[str]]:
    """The protocol of reproducer ``rel`` and the mechanisms of its declared checks."""
    from elastic_sim.checks import run_checks
    from elastic_sim.mechanisms import signatures_of
    from elastic_sim.pipeline import record
    from elastic_sim.spec import compile_spec

    spec = compile_spec(FOUND / rel)
    declared = set(spec.scenario.expect.violated_checks or ())
    events = record(spec, metrics_wanted=False).events
    sigs = signatures_of(run_checks(events, declared), (), events)
    return str(spec.scenario.protocol.name or "static"), sorted(str(s) for s in sigs)


def registry() -> dict[str, Any]:
    """The registry the reproducers give, with the hand-kept entries of the file."""
    path = FOUND / "mechanisms.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    out: dict[str, list[dict[str, str]]] = {}
    for p, entries in old.get("protocols", {}).items():
        out[p] = [e for e in entries if not e["source"].endswith(".yaml")]
    for file in sorted(FOUND.rglob("*.yaml")):
        rel = file.relative_to(FOUND).as_posix()
        protocol, mechanisms = reproducer_mechanisms(rel)
        for m in mechanisms:
            out.setdefault(protocol, []).append({"mechanism": m, "source": rel})
    return {"about": old.get("about", "written by scripts/found_mechanisms.py"),
            "protocols": {p: sorted(es, key=lambda e: (e["source"], e["mechanism"]))
                          for p, es in sorted(out.items())}}


def main() -> int:
    """Write (or, with --check, compare) the registry."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    text = json.dumps(registry(), indent=1) + "\n"
    path = FOUND / "mechanisms.json"
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{path} differs from what the reproducers give")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
