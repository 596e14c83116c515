"""What a training script tells elastic-sim, so that its runs are measured: four calls.

    from elastic_sim import probe

    probe.restore(step, state)  # loaded a checkpoint taken at `step`
    probe.sync(step, state)     # every member now holds the same state (DDP(model) broadcast
                                # rank 0's), at `step`
    probe.step(step)            # training step `step` is done (the first is 1)
    probe.commit(step, state)   # a checkpoint a restart resumes from is written, at `step`

``state`` is optional: the state's bytes (or a list of buffers, hashed in order, such as
each parameter's ``tensor.numpy()``), or a digest string of your own. Members that hold the
same state must give the same bytes. With it, the check ``state_agreement`` holds every
sync to the root's state; without it, that check says it could not judge.

Under ``elastic-sim run --mode torchrun --script``, each call appends one event of the
project's trace (:mod:`elastic_sim.trace_kinds`: ``restore``, ``sync``, ``step``,
``commit``; and this worker's ``proc_start``, written when it imports this module, with the
time its process started) to this worker's file in ``ELASTIC_SIM_TRACE_DIR``, which the run
reads back; the bundled worker writes its events through this module too. Import it at the
top of the script: a worker that dies before it does is not in the trace. Anywhere else (no
``ELASTIC_SIM_TRACE_DIR`` in the environment, as under a plain ``torchrun``) every call
returns at once and writes nothing, so the same script runs unchanged in production.

Optionally, :func:`collective` traces the collectives a script runs itself (a DDP
communication hook, an explicit allreduce), so that every member entering the same
collective sequence is checked too.

Importing it imports nothing beyond the standard library (``elastic_sim``'s own
``__init__`` is a docstring and a version); it never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

TRACE_DIR = "ELASTIC_SIM_TRACE_DIR"
"""The folder a worker's trace file goes to (set by elastic-sim's torchrun launcher)."""
HOST = "ELASTIC_SIM_HOST"
"""The scenario's host the worker runs on."""
ROUND = "ELASTIC_SIM_ROUND"
"""The rendezvous round the worker's agent joined before starting it."""

State = Any
"""A state as a call takes it: its digest (a str), its bytes or any other buffer hashlib
hashes (a contiguous NumPy array, ...), a list or tuple of buffers hashed in order, or
None."""


def digest(state: State) -> str:
    """A short fingerprint of ``state`` (its own string if it is one; "" for none)."""
    if state is None:
        return ""
    if isinstance(state, str):
        return state
    h = hashlib.sha256()
    if isinstance(state, (list, tuple)):
        for part in state:
            h.update(part)
    else:
        h.update(state)
    return h.hexdigest()[:16]


class Collective:
    """A collective this process entered (its ``coll_enter`` is written): say how it
    ended with :meth:`done` or :meth:`failed`, or use it as a context manager around a
    blocking call. Does nothing outside elastic-sim."""

    def __init__(self, probe: Probe | None, seq: int, op: str) -> None:
        self._probe, self.seq, self.op = probe, seq, op

    def done(self) -> None:
        """It completed for this process."""
        if self._probe is not None:
            self._probe.record("coll_done", group=self._probe.group, seq=self.seq, op=self.op)

    def failed(self, error: BaseException | str) -> None:
        """It failed or timed out for this process (``error``: the exception)."""
        if self._probe is not None:
            name = error if isinstance(error, str) else type(error).__name__
            self._probe.record("coll_fail", group=self._probe.group, seq=self.seq,
                               op=self.op, error=name)

    def __enter__(self) -> Collective:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.done()
        else:
            self.failed(exc)


class Probe:
    """One worker's trace file: the events it writes, one JSON line each, flushed at once
    (a worker may be SIGKILLed any moment), stamped with wall time (the launcher shifts
    them to run time)."""

    def __init__(self, out: IO[str], host: str, proc: str, env: Mapping[str, str]) -> None:
        self._out, self.host, self.proc = out, host, proc
        self.round = int(env.get(ROUND, "-1"))
        """The rendezvous round its agent started it in (-1: not known)."""
        self.rank = int(env.get("RANK", "0"))
        """Its global rank (torchrun's ``RANK``)."""
        self.group = f"te-round{self.round}"
        """The name its collectives are traced under: the round's."""
        self._lock = threading.Lock()  # a communication hook may call from another thread
        self._seq = 0

    def record(self, kind: str, **data: Any) -> None:
        """Append one event of ``kind`` (docs/trace-events.md) stamped now."""
        self.write(time.time(), kind, data)

    def write(self, t: float, kind: str, data: Mapping[str, Any]) -> None:
        """Append one event stamped with wall time ``t``."""
        line = json.dumps({"t": t, "host": self.host, "proc": self.proc, "kind": kind,
                           "data": dict(data)})
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def step(self, n: int) -> None:
        """Training step ``n`` is done."""
        self.record("step", round=self.round, step=int(n))

    def commit(self, step: int, state: State = None) -> None:
        """Progress up to ``step`` is committed (a checkpoint a restart resumes from)."""
        self.record("commit", step=int(step), digest=digest(state))

    def restore(self, step: int, state: State = None, reason: str = "checkpoint") -> None:
        """The state was rolled back to the commit of ``step``."""
        self.record("restore", step=int(step), digest=digest(state), reason=reason)

    def sync(self, step: int, state: State = None, root: int | str = 0) -> None:
        """This member adopted the state of ``root`` (the global rank whose state every
        member now holds; elastic-sim names its host), at ``step``."""
        self.record("sync", round=self.round, rank=self.rank, root=root, step=int(step),
                    digest=digest(state))

    def collective(self, op: str, nbytes: int) -> Collective:
        """This process enters its next collective ``op`` of ``nbytes`` bytes."""
        with self._lock:
            seq, self._seq = self._seq, self._seq + 1
        self.record("coll_enter", group=self.group, seq=seq, op=op, nbytes=int(nbytes))
        return Collective(self, seq, op)


def started() -> float:
    """The wall time this process started (Linux's ``/proc``; elsewhere: now)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, starttime
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


def open_probe(env: Mapping[str, str]) -> Probe | None:
    """This process's probe when ``env`` is a worker's under elastic-sim (None
    otherwise), its ``proc_start`` written."""
    trace_dir, host, local = env.get(TRACE_DIR), env.get(HOST), env.get("LOCAL_RANK")
    if not trace_dir or not host or local is None:
        return None
    pid = os.getpid()
    try:
        out = open(Path(trace_dir) / f"worker-{host}-{pid}.jsonl", "a", encoding="utf-8")
    except OSError:
        return None
    probe = Probe(out, host, f"{host}/w{local}", env)
    probe.write(started(), "proc_start", {
        "entry": Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python",
        "pid": pid, "restart_count": int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))})
    return probe


_probe: Probe | None = open_probe(os.environ)
"""This process's probe, opened when the module is first imported: a worker is in the
trace from its import of the probe on, even if it dies before its first call."""


def _forget() -> None:
    """A forked child is no worker of its own (a data loader's): it writes nothing."""
    global _probe
    _probe = None


os.register_at_fork(after_in_child=_forget)


def here() -> Probe | None:
    """This process's probe; None outside elastic-sim."""
    return _probe


def active() -> bool:
    """Whether this process runs under elastic-sim (its calls are written)."""
    return here() is not None


def step(n: int) -> None:
    """Training step ``n`` is done (the first step is 1; after a restore to step k, the
    next is k + 1)."""
    p = here()
    if p is not None:
        p.step(n)


def commit(step: int, state: State = None) -> None:
    """A checkpoint of the state after ``step`` is written: a restart resumes from it.
    Call it on every rank once the checkpoint is on disk (after rank 0's save and a
    barrier, for a shared checkpoint)."""
    p = here()
    if p is not None:
        p.commit(step, state)


def restore(step: int, state: State = None) -> None:
    """The state was loaded from the checkpoint of ``step``."""
    p = here()
    if p is not None:
        p.restore(step, state)


def sync(step: int, state: State = None, root: int = 0) -> None:
    """Every member now holds the state of global rank ``root`` (DDP's constructor
    broadcasts rank 0's), at ``step``; call it on every rank once per (re)start, after
    the broadcast."""
    p = here()
    if p is not None:
        p.sync(step, state, root)


def collective(op: str, nbytes: int) -> Collective:
    """This process enters its next collective ``op`` (``allreduce``, ``broadcast``, ...)
    of ``nbytes`` bytes; say how it ended on what this returns. Every member must enter
    the same ones in the same order (what the check ``collective_sequence`` holds them
    to)."""
    p = here()
    return p.collective(op, nbytes) if p is not None else Collective(None, -1, op)
