"""A search's findings as its outcomes come in, in case order: each outcome's mechanisms
counted under their findings (:mod:`elastic_sim.findings`), a find handed out to the
workers for a new one (and for a mechanism a smaller schedule than its first case shows),
each find's result taken in the order they were handed out, the smallest reproducer kept
and the others' files removed, and the curve of mechanisms and states over the search."""

from __future__ import annotations

import shutil
import time
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_sim.campaign import Handle
from elastic_sim.case_pool import CaseRunner, Found
from elastic_sim.cases import Outcome
from elastic_sim.corpus import Fixed, Planner
from elastic_sim.draws import Search
from elastic_sim.explore_summary import write_summary
from elastic_sim.faults.schedule import schedule_size
from elastic_sim.faults.triggers import unwrap
from elastic_sim.findings import Finding, ordered
from elastic_sim.mechanisms import Signature, known
from elastic_sim.outdir import safe_component

if TYPE_CHECKING:
    from elastic_sim.explore import Exploration

MAX_SHRINKS = 2
"""Shrinks one mechanism gets: its first case, and one later case smaller than it."""


class Ledger:
    """The findings of a search as its outcomes come in (in index order), and the finds
    handed out for them."""

    def __init__(self, res: Exploration, search: Search, out_dir: Path | None,
                 started: float) -> None:
        self.res, self.search, self.out_dir, self.started = res, search, out_dir, started
        self.by_sig: dict[Signature, Finding] = {}
        self.pending: deque[tuple[Handle, list[Finding]]] = deque()
        self.known = known()

    def judge(self, out: Outcome, runner: CaseRunner, deadline: float | None) -> bool:
        """Count ``out``'s mechanisms; hand out a find for the new ones (and for a known
        one showed by a smaller schedule than the one it was shrunk from); whether any
        was new."""
        res, case = self.res, out.case
        types = Counter(unwrap(f).type for f in case.faults)
        fresh: list[Finding] = []
        again: list[Finding] = []
        for sig in out.signatures:
            f = self.by_sig.get(sig)
            if f is None:
                f = Finding(sig, out.messages[sig], case.index, case.faults, case.faults,
                            case.seed, tie_seed=case.tie_seed, variation=case.variation,
                            standing=out.standing.get(sig, "broken_promise"),
                            known=self.known.match(res.protocol, sig),
                            found_s=time.perf_counter() - self.started)
                f.fault_types.update(types)
                self.by_sig[sig] = f
                fresh.append(f)
                continue
            f.cases += 1
            f.fault_types.update(types)
            if f.shrinks < MAX_SHRINKS and schedule_size(case.faults, self.search.pinned) \
                    < schedule_size(f.original, self.search.pinned):
                again.append(f)
        taken: set[str] = set()
        for batch in ([fresh] if fresh else []) + [[f] for f in again]:
            self._hand_out(out, batch, runner, deadline, taken)
        return bool(fresh)

    def _hand_out(self, out: Outcome, fs: list[Finding], runner: CaseRunner,
                  deadline: float | None, taken: set[str]) -> None:
        """Submit one find of ``fs`` in ``out``'s case. A reproducer is named after the
        scenario, the check and the case, with its place in ``fs`` (or the next free
        number) as a suffix: never one of ``taken``, the names this case's other finds
        got, which may run at once in other workers and must not write into one
        folder."""
        names = []
        for k, f in enumerate(fs):
            f.shrinks += 1
            base = f"{self.res.scenario}-{f.signature.check}-{out.case.index}"
            name = safe_component(base + (f"-{k}" if k else ""))
            while name in taken:
                k += 1
                name = safe_component(f"{base}-{k}")
            taken.add(name)
            names.append(name)
        handle = runner.submit_find(out.case, [f.signature for f in fs],
                                    [out.messages[f.signature] for f in fs], names,
                                    deadline, self.out_dir)
        self.pending.append((handle, fs))

    def settle(self, runner: CaseRunner, wait: bool) -> None:
        """Take the finds that are done (all of them: ``wait``), in the order handed out."""
        while self.pending and (wait or runner.ready(self.pending[0][0])):
            handle, fs = self.pending.popleft()
            for f, got in zip(fs, runner.found(handle), strict=True):
                self._adopt(f, got)
            if self.out_dir is not None:
                self.res.findings = ordered(self.by_sig.values())
                self.res.wall_s = time.perf_counter() - self.started
                write_summary(self.res, self.out_dir / "explore.json")

    def _adopt(self, f: Finding, got: Found) -> None:
        """A find's result: kept when it is the mechanism's first or its smallest."""
        self.res.shrink_runs += got.shrunk.runs
        f.shrink_runs += got.shrunk.runs
        small, pinned = got.shrunk.case, self.search.pinned
        if f.shrunk:
            if schedule_size(small.faults, pinned) >= schedule_size(f.faults, pinned):
                self._drop(got.reproducer.name)
                return
            if f.reproducer is not None:
                self._drop(f.reproducer.stem)
        f.shrunk = True
        f.faults, f.seed, f.tie_seed = small.faults, small.seed, small.tie_seed
        f.variation, f.cut = small.variation, got.shrunk.cut
        repro = got.reproducer
        f.reproduced, f.trace_sha256 = repro.reproduced, repro.trace_sha256
        if repro.standing is not None:
            f.standing = repro.standing
        if self.out_dir is not None:
            f.reproducer = self.out_dir / f"{repro.name}.yaml"
            run_dir = self.out_dir / repro.name
            f.run_dir = run_dir if run_dir.is_dir() else None

    def _drop(self, name: str) -> None:
        """Remove a reproducer this search wrote and no longer keeps."""
        if self.out_dir is None:
            return
        (self.out_dir / f"{name}.yaml").unlink(missing_ok=True)
        if (self.out_dir / name).is_dir():
            shutil.rmtree(self.out_dir / name)

    def point(self, planner: Planner | Fixed) -> None:
        """A point of the coverage curve: cases, seconds, mechanisms, states."""
        states = sum(1 for x in planner.seen if x.startswith("s:"))
        self.res.curve.append((self.res.cases, round(time.perf_counter() - self.started, 3),
                               len(self.by_sig), states))


__all__ = ["MAX_SHRINKS", "Ledger"]
