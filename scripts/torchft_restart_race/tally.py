"""Per run (``python3 tally.py RUN ...`` in this folder, after ``run.sh``): each restart of
each replica group, whether its rank 1 read another Manager address than its rank 0 (the
previous attempt's: a stale one) and whether that attempt failed, and the attempts each
group made (group 1 is never faulted: an attempt beyond 0 is a healthy group restarted)."""

from __future__ import annotations

import os
import re
import sys


def tally(run: str) -> list[str]:
    """The lines of one run."""
    out = []
    groups = 0
    while os.path.exists(f"g{groups}.{run}.log"):
        groups += 1
    for g in range(groups):
        with open(f"g{g}.{run}.log", encoding="utf-8", errors="replace") as f:
            text = f.read()
        read = {(int(a), int(r)): v for r, a, v in re.findall(
            rf"\[g{g} r(\d+) attempt (\d+)\] Manager\(\) read manager_addr = (\S+)", text)}
        attempts = sorted({a for a, _ in read})
        done = re.search(rf"\[g{g} r0 attempt (\d)\] DONE", text)
        for a in attempts:
            if a == 0 or (a, 0) not in read or (a, 1) not in read:
                continue
            others = sorted(r for b, r in read if b == a and r > 0)
            stale = [r for r in others if read[(a, r)] != read[(a, 0)]]
            failed = f"attempt {a + 1}]" in text
            out.append(f"g{g} restart {a}: ranks that read a stale address {stale} of "
                       f"{others} attempt failed={failed}")
        out.append(f"g{g}: attempts {attempts}, done at attempt "
                   f"{done.group(1) if done else None}")
    return out


if __name__ == "__main__":
    for run in sys.argv[1:]:
        print(f"run {run}:\n  " + "\n  ".join(tally(run)))
