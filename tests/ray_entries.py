"""A protocol entry for the Ray tests: the static protocol, except that while
``ES_RAY_KILL_MARKER`` names a file that does not exist yet, the first host process to
start outside the process ``ES_RAY_SPARE_PID`` (the campaign's own, which runs the scenario
too) creates it and kills the process it runs in: a Ray worker, mid-campaign."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.static.main import host_main as static_main

MARKER_ENV = "ES_RAY_KILL_MARKER"
SPARE_ENV = "ES_RAY_SPARE_PID"


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """The static protocol's host, after killing this process once (see the module)."""
    marker = os.environ.get(MARKER_ENV)
    if marker and os.environ.get(SPARE_ENV) != str(os.getpid()):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return await static_main(rt, args)
