"""Which event kinds each check reads: found out, not written down by hand.

Each check runs over real traces read in the checks' protocol-neutral vocabulary
(:attr:`History.neutral <elastic_sim.history.History.neutral>`) whose ``kind`` fields are
:class:`_Probe` strings, which remember every string they are compared with (this finds
kinds held in constants such as ``PROGRESS``); the kinds its own source names as string
literals are added (this finds comparisons on code paths the traces did not reach). Of
those, the kinds of the vocabulary given are the kinds the check reads.
``docs/writing-a-protocol.md`` shows the table (:func:`reads_table`), and a test keeps it
current.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Sequence

from elastic_sim.checks import CHECKS
from elastic_sim.history import History
from elastic_sim.trace import TraceEvent

TRACES = ("scale_down", "torchelastic/worker_crash", "horovod/hosts_added_and_removed",
          "torchft/replica_crash")
"""Built-in scenarios whose traces drive the checks: one per protocol model."""


class _Probe(str):
    """A str that records what it is compared with."""

    seen: set[str]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            self.seen.add(str(other))
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def startswith(self, prefix: str | tuple[str, ...], *args: int) -> bool:  # type: ignore[override]
        for p in (prefix,) if isinstance(prefix, str) else prefix:
            self.seen.add(p + "*")
        return str.startswith(self, prefix, *args)

    __hash__ = str.__hash__


def check_reads(traces: Sequence[Sequence[TraceEvent]], vocabulary: Sequence[str]
                ) -> dict[str, list[str]]:
    """Check name -> the kinds (of ``vocabulary``) it compares the kinds of the traces'
    events with, the traces read as the checks read them."""
    known = set(vocabulary)
    read = [History(events).neutral.raw for events in traces]
    out: dict[str, list[str]] = {}
    for check in CHECKS:
        seen: set[str] = set()
        for events in read:
            probed = []
            for ev in events:
                kind = _Probe(ev.kind)
                kind.seen = seen
                probed.append(dataclasses.replace(ev, kind=kind))
            check(History(probed, neutral=True))
        seen.update(_compared_in_source(inspect.getsource(check)))
        out[check.__name__] = sorted(k for k in seen if k in known or k.endswith("*"))
    return out


def _compared_in_source(src: str) -> set[str]:
    """String literals the source compares a ``kind`` with (``kind == "x"``, ``kind in
    ("x", "y")``), hands to a by-kind helper (``_by(events, "x", ...)``) or asks a history
    for (``hist.of("x", "y")``)."""
    found = set(re.findall(r"""(?:kind\s*[!=]=\s*|_by\(\w+,\s*)["'](\w+)["']""", src))
    for group in re.findall(r"(?:kind\s+(?:not\s+)?in\s+|\.(?:of|recorded|first|last))"
                            r"\(([^)]*)\)", src):
        found.update(re.findall(r"""["'](\w+)["']""", group))
    return found


def reads_table() -> str:
    """A Markdown table: every check, the event kinds it reads (from built-in traces)."""
    from elastic_sim.builtin import builtin_dir
    from elastic_sim.pipeline import simulate
    from elastic_sim.scenario import load_scenario
    from elastic_sim.trace_kinds import NEUTRAL_KINDS

    traces = []
    for name in TRACES:
        sc = load_scenario(builtin_dir() / f"{name}.yaml")
        traces.append(simulate(sc, sc.seed)[0])
    docs = {c.__name__: re.sub(r":\w+:`", "`", " ".join((c.__doc__ or "").split()))
            .replace("``", "`") for c in CHECKS}
    lines = ["| check | reads events of kind | what it checks |", "|---|---|---|"]
    for name, kinds in check_reads(traces, NEUTRAL_KINDS).items():
        lines.append(f"| `{name}` | {', '.join(f'`{k}`' for k in kinds)} | {docs[name]} |")
    return "\n".join(lines)
