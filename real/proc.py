"""``python -m elastic_sim.real.proc SPEC``: the command line of every process of a real
run; what it runs is :func:`elastic_sim.real.runtime.proc.main`.

The address stays here, at the top of the package, whatever room the code lives in:
command lines carry it, and whoever looks for a run's processes (``ps``, a test's scan for
leftovers) finds them by it.
"""

from __future__ import annotations

import sys

from elastic_sim.real.runtime.proc import main

if __name__ == "__main__":
    main(sys.argv)
