"""The explore ledger hands out finds whose reproducers never share a folder: finds of
one case may run at once in different worker processes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from elastic_sim.faults.model import CrashHost
from elastic_sim.ledger import Ledger
from elastic_sim.mechanisms import Signature


class Runner:
    """Records the reproducer names of every find submitted."""

    def __init__(self) -> None:
        self.names: list[list[str]] = []

    def submit_find(self, case: Any, sigs: list[Signature], messages: list[str],
                    names: list[str], deadline: float | None, out_dir: Path | None) -> int:
        self.names.append(names)
        return len(self.names)


def _outcome(index: int, faults: list[Any], sigs: list[Signature]) -> Any:
    case = SimpleNamespace(index=index, faults=faults, seed=0, tie_seed=None,
                           variation=None)
    return SimpleNamespace(case=case, signatures=sigs, messages={s: "m" for s in sigs},
                           standing={})


def test_finds_of_one_case_never_share_a_reproducer_name() -> None:
    """Case 9 shows a new clean_shutdown mechanism and, with a smaller schedule, one
    already found: two finds of one check in one case, handed out as two tasks."""
    a = Signature("clean_shutdown", "job_failed", "coord:x")
    b = Signature("clean_shutdown", "proc_exit", "coord:y")
    c = Signature("terminates", "run_end", "-:hung")
    res = SimpleNamespace(scenario="camp", protocol="horovod")
    ledger = Ledger(res, SimpleNamespace(pinned={}), None, 0.0)  # type: ignore[arg-type]
    runner = Runner()
    big = [CrashHost("x", 1.0, "h1"), CrashHost("y", 2.0, "h2")]
    ledger.judge(_outcome(3, big, [a]), runner, None)  # type: ignore[arg-type]
    assert runner.names == [["camp-clean_shutdown-3"]]
    ledger.judge(_outcome(9, big[:1], [b, c, a]), runner, None)  # type: ignore[arg-type]
    new, again = runner.names[1:]
    assert new == ["camp-clean_shutdown-9", "camp-terminates-9-1"]
    assert again == ["camp-clean_shutdown-9-1"]  # the same check's, in a second task
    flat = [n for batch in runner.names for n in batch]
    assert len(set(flat)) == len(flat)
