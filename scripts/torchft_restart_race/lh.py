"""The real torchft 0.2.0 Lighthouse on 127.0.0.1:29510 with the command line's defaults
(join timeout 60 s, quorum tick 100 ms, heartbeat timeout 5 s) for ``argv[1]`` seconds;
``argv[2]``, when given, is the join timeout in milliseconds."""

from __future__ import annotations

import sys
import time

from torchft._torchft import LighthouseServer

JOIN_MS = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
lighthouse = LighthouseServer(bind="127.0.0.1:29510", min_replicas=1, join_timeout_ms=JOIN_MS,
                              quorum_tick_ms=100, heartbeat_timeout_ms=5000)
print("lighthouse", lighthouse.address(), flush=True)
time.sleep(float(sys.argv[1]))
lighthouse.shutdown()
