"""A thousand mutations of the shipped scenarios, each run as a user would: the command
exits 0, 1 or 2 and nothing else (never an internal error), a refusal (exit 2) is one line
on stderr, and a refused scenario writes nothing. The mutations are drawn from a seed:
values of every kind put where others belong, keys dropped and added, numbers pushed to
their limits, host names broken, the YAML text cut or spliced."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
BASES = sorted((ROOT / "scenarios").rglob("*.yaml"))
MUTATIONS = 1000
CHUNKS = 8

NASTY: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, -0.0, 0.5, 1e-9, 1e308, -1e18, 2**63, 2**64, 10**30,
    math.inf, -math.inf, math.nan, "", " ", "0", "1e3", "1_000", "-1", "true", "h0", "h9",
    "*", "a/b", "..", "\x00", "h\x00", "<b>x</b>", "é" * 3, "x" * 100_000, "h0:0",
    "localhost:99999", [], [None], ["h0", "h0"], [[]], {}, {"x": 1}, {"type": "crash"},
    [{"type": "crash", "host": "h0", "at": 0}], {"name": "static"},
]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed scenario (mapping keys and list indices)."""
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


def _mutate(raw: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        places = [p for p in _paths(raw) if p]
        path = rng.choice(places)
        parent, key = _parent(raw, path), path[-1]
        what = rng.random()
        if what < 0.55:
            parent[key] = rng.choice(NASTY)
        elif what < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif what < 0.8 and isinstance(parent, dict):
            parent[rng.choice(["extra", "steps", "hosts", "type", "at", "host"])] = \
                rng.choice(NASTY)
        elif isinstance(parent[key], bool):
            parent[key] = not parent[key]
        elif isinstance(parent[key], int | float):
            parent[key] = parent[key] * rng.choice((-1, 0, 10, 1000, 1e-6, 1e9))
        elif isinstance(parent[key], list) and parent[key]:
            parent[key] = parent[key] * rng.choice((0, 2, 50))
        else:
            parent[key] = rng.choice(NASTY)
    return raw


def _text(base: Path, rng: random.Random) -> str:
    """A mutated scenario as YAML text (now and then the text itself cut or spliced)."""
    raw = yaml.safe_load(base.read_text())
    raw = _mutate(raw, rng)
    if isinstance(raw, dict):  # bounded runs: the mutation, not its length, is the point
        limit = raw.get("time_limit", 60)
        if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 60:
            raw["time_limit"] = 60
    text = yaml.safe_dump(raw, allow_unicode=True, sort_keys=False)
    if rng.random() < 0.1:
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(["", ":", "- ", "{", "]", "\t", "&a *a", "\n  x: 1"]) \
            + text[at + rng.randrange(3):]
    return text


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_mutated_scenarios_exit_0_1_or_2_and_a_refusal_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], chunk: int) -> None:
    rng = random.Random(f"fuzz/{chunk}")
    codes: dict[int, int] = {}
    for i in range(MUTATIONS // CHUNKS):
        base = rng.choice(BASES)
        path = tmp_path / f"m{i}.yaml"
        path.write_text(_text(base, rng), encoding="utf-8")
        out = tmp_path / f"out{i}"
        try:
            rc = main(["run", str(path), "--out", str(out), "--quiet", "--no-report",
                       "--wall-limit", "10"])
        except SystemExit as exc:  # argparse only: not expected here
            rc = int(exc.code or 0)
        err = [line for line in capsys.readouterr().err.splitlines()
               if line.strip() and not line.startswith(("note:", "warning:"))]
        what = f"mutation {i} of chunk {chunk} (of {base.name}):\n{path.read_text()[:2000]}"
        assert rc in (0, 1, 2), f"exit {rc}: {err}\n{what}"
        if rc == 2:
            assert len(err) == 1, f"{err}\n{what}"
            assert len(err[0]) < 2500, what
            assert not out.exists(), what
        codes[rc] = codes.get(rc, 0) + 1
    assert codes.get(2, 0) > 0
