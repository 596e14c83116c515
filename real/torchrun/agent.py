"""One host's agent in ``--mode torchrun``: torch's own ``torchrun`` entry point
(``torch.distributed.run.main``, what the ``torchrun`` console script calls), with
torchelastic's own streams written down as they happen.

Run as ``python -m elastic_sim.real.torchrun.agent HOST STREAM_FILE CHECKPOINT READY_FD
GO_FD -- ARGV...`` where ARGV is torchrun's command line. Before anything else it imports
torch and writes ``READY`` to the pipe READY_FD; it starts torchrun when the launcher
answers ``GO <t0>`` on the pipe GO_FD (so, as in real mode, the interpreter's and torch's
import cost is not run time), and closes both. The handshake has pipes of its own because
torchrun's workers inherit the agent's stdout and stderr (a training script prints), which
stay open for as long as they run. Then, into STREAM_FILE, one JSON object per line, each
stamped with the wall time it was emitted:

- ``{"src": "event", "logger": ..., "event": {...}}``: every record of torchelastic's
  events API (``torch.distributed.elastic.events``: the rendezvous events of the c10d
  handler and the agent's events), as upstream serialized it;
- ``{"src": "log", "logger": ..., "level": ..., "text": ...}``: every log record of
  ``torch.distributed.elastic`` at INFO and above (the agent's rendezvous results,
  restarts, worker exit records);
- ``{"src": "end", "code": ..., "error": ..., "checkpoint": {...}}``: how ``main``
  returned or what it raised, with the host's last checkpoint (the bundled worker's).

Nothing here changes what torchrun does; one addition: when the c10d handler reports that
this node joined a round, the round number is put in this process's environment
(``ELASTIC_SIM_ROUND``), which torchrun copies into the workers it starts next, so they
can name their process group and their trace events after it without unpickling the
rendezvous state.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

ROUND_ENV = "ELASTIC_SIM_ROUND"
"""The environment variable that carries the rendezvous round to the workers."""

EVENT_LOGGERS = ("torchelastic-events-null",)
"""The logger of the agent's events (the rendezvous events go through the handler table)."""

_JOINED = re.compile(r"has joined round (\d+) of")


class StreamHandler(logging.Handler):
    """Writes torchelastic's events and logs as JSON lines, flushed at once (a host may
    be SIGKILLed any moment)."""

    def __init__(self, out: TextIO, src: str) -> None:
        super().__init__(logging.INFO)
        self._out = out
        self._src = src

    def emit(self, record: logging.LogRecord) -> None:
        """One record as one line."""
        try:
            line: dict[str, Any] = {"t": record.created, "src": self._src,
                                    "logger": record.name}
            text = record.getMessage()
            if self._src == "event":
                line["event"] = json.loads(text)
                joined = _JOINED.search(str(line["event"].get("message", "")))
                if joined:
                    os.environ[ROUND_ENV] = joined.group(1)
            else:
                line["level"] = record.levelname
                line["text"] = text
            self._out.write(json.dumps(line) + "\n")
            self._out.flush()
        except Exception:  # never let a log line break the agent
            self.handleError(record)


def _install(out: TextIO) -> None:
    from torch.distributed.elastic.events import handlers

    # Upstream records rendezvous events only when their destination has a real handler
    # (construct_and_record_rdzv_event returns early on the default NullHandler): the
    # handlers table is its configuration point.
    handlers._log_handlers["dynamic_rendezvous"] = StreamHandler(out, "event")
    for name in EVENT_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(StreamHandler(out, "event"))
    elastic = logging.getLogger("torch.distributed.elastic")
    elastic.setLevel(logging.INFO)
    elastic.addHandler(StreamHandler(out, "log"))


def _checkpoint(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def handshake(ready_fd: int, go_fd: int) -> bool:
    """Say READY on ``ready_fd``, wait for ``GO <t0>`` on ``go_fd``, close both (so no
    worker inherits them); whether GO came."""
    with os.fdopen(ready_fd, "wb", buffering=0) as ready, os.fdopen(go_fd, "rb") as go:
        ready.write(b"READY\n")
        line = go.readline().split()
    return len(line) == 2 and line[0] == b"GO"


def main() -> int:
    """Import torch, say READY, wait for GO, run torchrun, record how it ended."""
    host, stream, ckpt = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    ready_fd, go_fd = int(sys.argv[4]), int(sys.argv[5])
    argv = sys.argv[sys.argv.index("--") + 1:]
    os.environ.setdefault("LOGLEVEL", "INFO")
    import torch.distributed.run as torchrun

    if not handshake(ready_fd, go_fd):
        return 3
    with stream.open("a", encoding="utf-8") as out:
        _install(out)
        end: dict[str, Any] = {"src": "end", "host": host, "code": 0, "error": ""}
        try:
            torchrun.main(argv)
        except SystemExit as exc:  # @record's wrapper exits after printing the error
            end["code"] = exc.code if isinstance(exc.code, int) else 1
            raise
        except BaseException as exc:
            end["code"] = 1
            end["error"] = f"{type(exc).__name__}: {exc}".split("\n")[0][:500]
            raise
        finally:
            end["t"] = time.time()
            end["checkpoint"] = _checkpoint(ckpt)
            out.write(json.dumps(end) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
