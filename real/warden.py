"""``python -m elastic_sim.real.warden``: the command line of a run's warden; what it runs
is :func:`elastic_sim.real.supervisor.warden.watch`.

The address stays here, at the top of the package, whatever room the code lives in:
command lines carry it, and whoever looks for a run's wardens finds them by it.
"""

from __future__ import annotations

import sys

from elastic_sim.real.supervisor.warden import watch

if __name__ == "__main__":
    watch(sys.stdin.buffer)
