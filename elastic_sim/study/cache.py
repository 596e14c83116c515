"""The samples' disk cache: one JSON file per sample, keyed by the model's version and the
sample's whole scenario (protocol, knobs, size, workload, failures, seed). The simulator
is deterministic, so a key names one result; a later study that needs the same sample
reads it instead of running it. The model's version is a digest of the code that decides
a sample's outcome (the simulator, the protocols, the fault vocabulary, the readers), so
a change there starts a fresh cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from elastic_sim.study.samples import Measured

MODEL_PARTS = ("sim", "protocols", "faults", "reports")
"""Subpackages whose code decides a sample's outcome (with the top-level modules and the
sample reader)."""


@cache
def model_version() -> str:
    """A digest of the model's code (12 hex digits)."""
    root = Path(str(files("elastic_sim")))
    paths: list[Path] = [*sorted(root.glob("*.py")), root / "study" / "samples.py"]
    for part in MODEL_PARTS:
        base = Path(str(files(f"elastic_sim.{part}")))
        paths += sorted(base.rglob("*.py"))
    digest = hashlib.sha256()
    for p in paths:
        digest.update(p.name.encode())
        digest.update(p.read_bytes())
    return digest.hexdigest()[:12]


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/elastic-sim/study`` (``~/.cache/...`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "elastic-sim" / "study"


class SampleCache:
    """Samples on disk under ``root/<model version>/``; ``root`` None keeps nothing."""

    def __init__(self, root: Path | None) -> None:
        self.root = root / model_version() if root is not None else None
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(scenario: dict[str, Any]) -> str:
        """The digest of a sample's scenario (canonical JSON)."""
        text = json.dumps(scenario, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, key: str) -> Path | None:
        return self.root / key[:2] / f"{key}.json" if self.root is not None else None

    def get(self, scenario: dict[str, Any]) -> Measured | None:
        """The cached sample of ``scenario``, if any (an unreadable file is a miss)."""
        path = self._path(self.key(scenario))
        if path is None or not path.is_file():
            self.misses += 1
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            got = Measured.from_json(data["measured"])
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return got

    def put(self, scenario: dict[str, Any], m: Measured) -> None:
        """Keep ``m`` (written whole: a temporary name, then renamed)."""
        path = self._path(self.key(scenario))
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.part")
            tmp.write_text(json.dumps({"model": model_version(), "scenario": scenario,
                                       "measured": m.to_json()}, indent=1), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written costs time, not results
