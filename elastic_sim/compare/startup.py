"""``compare --sim-start-up measure``: the sim's worker start-up cost measured on this
machine, now, instead of the scenario's ``cluster.process_start``.

A restarted worker's start-up (its world formed to its state synced) is, in torchrun
and real mode, a new interpreter plus ``import torch`` (the rest, group init and the state
broadcast, is milliseconds on loopback): 1.0-1.3 s on a quiet 2-CPU machine of this kind
(shared/calibration.md), the scenarios' default of 1.3 s, but 2.7-3.0 s when other jobs
load the same two CPUs. The protocols do not decide it; the machine does. So a
comparison on a loaded machine may measure it in the same run: every host's worker
starts at once (as after a fault), each ``python -c 'import torch, torch.distributed'``
timed from spawn to exit, the median over the processes of a few rounds. The value used
is stated in the comparison's output, next to the scenario's.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

IMPORT = "import torch, torch.distributed"


def measure(processes: int, rounds: int = 2) -> float:
    """Median seconds for ``processes`` interpreters started at once to import torch."""
    times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        running = [subprocess.Popen([sys.executable, "-c", IMPORT], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(max(1, processes))]
        while running:
            for p in [p for p in running if p.poll() is not None]:
                if p.returncode != 0:
                    raise RuntimeError(f"{sys.executable} -c {IMPORT!r} exited with "
                                       f"{p.returncode}")
                times.append(time.perf_counter() - started)
                running.remove(p)
            time.sleep(0.01)
    return round(statistics.median(times), 3)
