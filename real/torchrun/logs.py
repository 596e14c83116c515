"""Where the workers' output goes in ``--mode torchrun``: where torchrun users expect it.

Each agent is given torchrun's own ``--log-dir`` under the run directory and ``--tee=3``,
so every worker's stdout and stderr go to files of their own, in upstream's layout
(``logs/<host>/<run id>_<random>/attempt_<restart count>/<local rank>/stdout.log`` and
``stderr.log``; a restart for a membership change keeps its restart count, and upstream
then writes over that attempt's files), and are teed into the agent's log
(``agent-<host>.log``) with the worker's role and local rank in front of each line, as
torchrun shows them on its console. Anything torch or the script puts in a temporary
directory (``TMPDIR``: torch's own ``torchelastic_*`` folders, a script's scratch files)
goes under the run directory too, and goes with it.

When a worker fails, :func:`failure_tails` finds its stderr through its agent's stream
(the log directory upstream chose, the worker's exit record, the counted restarts before
it) and says how it ended, with the last lines it wrote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic_sim.real.torchrun.convert import COUNTED_RESTART, EXIT_RECORD, lines

LOGS = "logs"
"""The run directory's folder of torchrun's ``--log-dir`` (one per host)."""
TMP = "tmp"
"""The run directory's folder that is the agents' and workers' ``TMPDIR``."""
TAIL_LINES = 5
"""Lines of a failed worker's stderr shown."""
SHOWN = 8
"""Failed workers shown at most (the others are counted)."""

_LOG_DIR = re.compile(r"log directory set to: (\S+)")


def torchrun_flags(workdir: Path, host: str) -> list[str]:
    """torchrun's options that put ``host``'s workers' output under ``workdir``."""
    return [f"--log-dir={(workdir / LOGS / host).resolve()}", "--tee=3"]


def environment(workdir: Path) -> dict[str, str]:
    """What the agents' environment gets so that nothing of theirs lands in /tmp."""
    tmp = workdir / TMP
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(tmp.resolve())}


@dataclass(frozen=True)
class WorkerFailure:
    """A worker its agent saw fail (upstream's exit record)."""

    host: str
    local_rank: int
    pid: int
    code: int
    t: float
    """Wall time of the exit record."""
    stderr: Path | None
    """Its stderr file (None: the agent's stream named no log directory)."""

    @property
    def proc(self) -> str:
        """Its process name (``hN/wK``)."""
        return f"{self.host}/w{self.local_rank}"


def failures(host: str, stream: Path) -> list[WorkerFailure]:
    """The failed workers ``host``'s agent recorded in its stream, in order."""
    log_dir: Path | None = None
    attempt = 0
    out = []
    for ln in lines(stream):
        if ln.get("src") != "log":
            continue
        text = str(ln.get("text", ""))
        if m := _LOG_DIR.search(text):
            log_dir = Path(m.group(1))
        elif COUNTED_RESTART.search(text):
            attempt += 1
        elif m := EXIT_RECORD.search(text):
            rank = int(m.group(2))
            path = log_dir / f"attempt_{attempt}" / str(rank) / "stderr.log" if log_dir else None
            out.append(WorkerFailure(host, rank, int(m.group(3)), int(m.group(1)),
                                     float(ln.get("t", 0.0)), path))
    return out


def tail(path: Path, count: int = TAIL_LINES) -> list[str]:
    """The last ``count`` non-blank lines of ``path`` (none if it cannot be read)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - 16384))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-count:]


def failure_tails(workdir: Path, streams: Mapping[str, Path], t0: float,
                  killed: Mapping[str, object]) -> list[str]:
    """Lines that say how each failed worker ended, with the end of its stderr (paths
    relative to the run directory, ``workdir``'s parent); workers the scenario's faults
    killed are left out."""
    found = [f for host, path in streams.items() for f in failures(host, path)
             if f.proc not in killed and f.host not in killed]
    out: list[str] = []
    for f in sorted(found, key=lambda f: f.t)[:SHOWN]:
        where = _relative(f.stderr, workdir.parent) if f.stderr else "no log directory"
        end = tail(f.stderr) if f.stderr else []
        out.append(f"torchrun: {f.proc} (pid {f.pid}) failed with exit code {f.code} (its "
                   f"agent saw it at {f.t - t0:.3f} s); {'the end of ' if end else ''}its "
                   f"stderr ({where})" + (":" if end else " is empty"))
        out += [f"  | {line}" for line in end]
    if len(found) > SHOWN:
        out.append(f"torchrun: {len(found) - SHOWN} more failed workers; their output is in "
                   f"{_relative(workdir / LOGS, workdir.parent)}")
    return out


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def worker_outputs(workdir: Path) -> Sequence[Path]:
    """Every worker's stdout and stderr file of the run, in path order."""
    return sorted((workdir / LOGS).glob("*/*/attempt_*/*/std*.log"))
