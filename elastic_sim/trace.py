"""The trace format, defined once: JSON Lines, one :class:`TraceEvent` per line.

Both runtimes write it, every checker, metric and report reads it. Faults are events in
the same history as protocol operations (Jepsen's rule: the history is the single source
of truth). Lines are encoded deterministically (fixed key order, times rounded to the
microsecond) so that the same (scenario, seed) gives a byte-identical file.

run_start                 scenario, seed, mode, knobs (the protocol's, for the limits check)
run_end                   exit_codes {proc: code}, outcome ("completed"|"failed"|"hung")
proc_start / proc_exit    entry / code, reason
fault                     id, type, target, phase ("start"|"heal"|"skipped"), reason?
rdzv_join                 round
rdzv_complete             round, members [host...]: the round's membership is decided now
rdzv_done                 round, members [host...], rank, world_size[, master]
rdzv_rejected             round
rdzv_failed               round, error
group_init/group_ready    group, rank, size
coll_enter                group, seq, op, nbytes
coll_done / coll_fail     group, seq, op[, error][, peer] (peer: the group rank whose
                          death failed the call, where the runtime knows it: the sim)
group_failed              group, rank, size, error[, peer] (joining the group failed)
sync                      round, root, step, digest, root_digest
step                      round, step
commit                    step, digest
restore                   step, digest
job_done                  step, digest
job_failed                error
epoch_log                 epoch, batch, commits, hostname, start_rank, rank, size,
                          rendezvous (a training script's per-epoch log line, by rank 0)
hvd_discovery             poll, update ("added"|"removed"|"mixed"), hosts ["host:slots"...]
hvd_notify / _failed      to, timestamp, update (Horovod driver -> rank 0)
hvd_interrupt             skip_sync (a Horovod worker leaves training for a reset)
hvd_trip                  rendezvous, decision, blacklist [host...], states {slot: state}
hvd_assign                rendezvous, world_size, ranks {"host:local_rank": rank}, spawn
hvd_blacklist             target, cooldown_end, kill
hvd_lock_held             lock, owner, held_s (a driver lock held for a second or more)
hvd_stop / hvd_abort      error (driver stops the job / a worker aborts, exit 134)
hvd_*                     other Horovod driver and worker events (scheduled exits, ignored
                          exits, discovery errors, failed resumes)
agent_state               state (torchelastic WorkerState), remaining_restarts
agent_restart             reason ("FAILED"|"UNHEALTHY"|"nodes_waiting"), remaining_restarts
agent_signal              signal[, before_workers]
workers_started           round, base_rank, world_size, restart_count
exit_barrier_enter        round, world_size
exit_barrier_done/failed  round / error
rdzv_shutdown             closed (launch_agent's epilogue closed the rendezvous)
rdzv_shutdown_failed      error (also rdzv_keep_alive_failed)
rdzv_graceful_exit        error (a torchelastic spare of a closed rendezvous)
========================  ==============================================================
=======
Every event kind and its ``data`` fields are listed once, in
:mod:`elastic_sim.trace_kinds`; ``python -m elastic_sim.tracedoc`` writes them as the table
docs/trace-events.md, with the checks that read each kind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

TIME_DECIMALS = 6


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened: when (run time, seconds), where (host, process), what."""

    t: float
    host: str
    proc: str
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of ``data``."""
        return self.data.get(key, default)


def encode(ev: TraceEvent) -> str:
    """One line of JSON, byte-identical for equal events."""
    return json.dumps(
        {
            "t": round(ev.t, TIME_DECIMALS),
            "host": ev.host,
            "proc": ev.proc,
            "kind": ev.kind,
            "data": dict(ev.data),
        },
        separators=(",", ":"),
        sort_keys=False,
        allow_nan=False,
    )


def decode(line: str) -> TraceEvent:
    """Parse one line written by :func:`encode`."""
    obj = json.loads(line)
    return TraceEvent(
        t=float(obj["t"]),
        host=str(obj["host"]),
        proc=str(obj["proc"]),
        kind=str(obj["kind"]),
        data=obj.get("data") or {},
    )


class TraceWriter:
    """Writes events as JSON Lines and keeps the sha256 of what it wrote."""

    def __init__(self, fh: TextIO) -> None:
        self._fh = fh
        self._sha = hashlib.sha256()
        self.count = 0

    def write(self, ev: TraceEvent) -> None:
        """Append one event."""
        line = encode(ev) + "\n"
        self._sha.update(line.encode())
        self._fh.write(line)
        self.count += 1

    @property
    def sha256(self) -> str:
        """Digest of every line written so far."""
        return self._sha.hexdigest()


def write_trace(path: Path, events: Iterable[TraceEvent]) -> str:
    """Write a whole trace file; return its sha256."""
    with path.open("w", encoding="utf-8") as fh:
        w = TraceWriter(fh)
        for ev in events:
            w.write(ev)
        return w.sha256


def read_trace(path: Path) -> list[TraceEvent]:
    """Read a trace file."""
    return list(iter_trace(path))


def iter_trace(path: Path) -> Iterator[TraceEvent]:
    """Stream a trace file's events."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield decode(line)


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (how a run's trace is identified)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
