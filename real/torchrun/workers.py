"""The workers' own events in ``--mode torchrun``: what the bundled worker and a user's
script that calls :mod:`elastic_sim.probe` write, one file per worker process in
``ELASTIC_SIM_TRACE_DIR``, made run time, with what only their agents saw filled in.

A worker that could not write its ``proc_exit`` (a script never does; the bundled worker
cannot when it is killed) ends where the evidence says, in this order: the injector's kill
of it or its host; its agent's exit record (upstream logs a failed worker's exit code and
pid); its agent's closing signal (upstream stops the workers of a group it restarts with
SIGTERM, naming each pid); for the newest worker of its local rank, its agent seeing the
worker group succeed (upstream then enters the exit barrier: every worker returned 0);
else the end of its agent. A ``sync`` names its root by the global rank whose state was
adopted; the root's host is the one whose own ``sync`` of that round has that rank.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_sim.trace import TraceEvent

CLOSING = re.compile(r"Sending process (\d+) closing signal (\w+)")
"""Upstream's log line when it stops a worker (``PContext.close``)."""


@dataclass
class AgentView:
    """What one agent's stream says about its workers (wall times)."""

    exit_records: dict[int, tuple[float, int]] = field(default_factory=dict)
    """Worker pid -> (time, exit code): the agent's exit record of a failed worker."""
    closed: dict[int, tuple[float, str]] = field(default_factory=dict)
    """Worker pid -> (time, signal name) of the agent stopping it."""
    succeeded: list[float] = field(default_factory=list)
    """When its worker group succeeded (every worker returned 0)."""


@dataclass(frozen=True)
class Ends:
    """What the run knows of how processes ended, in run time."""

    t0: float
    """The run's origin on the wall clock."""
    killed: Mapping[str, tuple[float, str]]
    """Process or host name -> (run time, fault id) of the injector's kills."""
    agent_exit_t: Mapping[str, float]
    end: float


def worker_events(files: Sequence[list[dict[str, Any]]], agents: Mapping[str, AgentView],
                  ends: Ends) -> list[TraceEvent]:
    """Every worker file's events (``files``: each file's JSON lines) in run time, each
    worker's exit filled in as the module docstring says, each sync's root named."""
    generations: dict[str, list[tuple[float, list[dict[str, Any]]]]] = {}
    for got in files:
        if got:
            generations.setdefault(str(got[0]["proc"]), []).append((float(got[0]["t"]), got))
    out: list[TraceEvent] = []
    for gens in generations.values():
        newest = max(t for t, _ in gens)
        for t_start, got in gens:
            out += [TraceEvent(float(ln["t"]) - ends.t0, str(ln["host"]), str(ln["proc"]),
                               str(ln["kind"]), dict(ln.get("data") or {})) for ln in got]
            if not any(ln["kind"] == "proc_exit" for ln in got):
                out.append(_exit(got, agents, ends, newest=t_start == newest))
    return _roots_named(out)


def _exit(got: list[dict[str, Any]], agents: Mapping[str, AgentView], ends: Ends,
          newest: bool) -> TraceEvent:
    """The ``proc_exit`` of a worker that wrote none (its lines ``got``)."""
    first = got[0]
    host, proc, pid = str(first["host"]), str(first["proc"]), first["data"].get("pid")
    view = agents.get(host, AgentView())
    last = float(got[-1]["t"])
    kill = ends.killed.get(proc) or ends.killed.get(host)
    record = view.exit_records.get(int(pid)) if pid is not None else None
    closed = view.closed.get(int(pid)) if pid is not None else None
    won = next((t for t in view.succeeded if t >= last), None) if newest else None
    if kill is not None and kill[0] >= last - ends.t0:
        t, data = kill[0], {"code": -9, "reason": f"killed by fault {kill[1]}"}
    elif record is not None:
        t, data = record[0] - ends.t0, {"code": record[1], "reason": "its agent's exit record"}
    elif closed is not None:
        t, data = closed[0] - ends.t0, {"code": -_signum(closed[1]),
                                        "reason": f"stopped by its agent ({closed[1]})"}
    elif won is not None:
        t, data = won - ends.t0, {"code": 0,
                                  "reason": "returned (its agent saw its worker group succeed)"}
    else:
        t, data = max(last - ends.t0, min(ends.agent_exit_t.get(host, ends.end), ends.end)), {
            "code": -9, "reason": "ended with its agent (no exit record)"}
    return TraceEvent(t, host, proc, "proc_exit", {**data, "pid": pid})


def _signum(name: str) -> int:
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        return 9


def _roots_named(events: list[TraceEvent]) -> list[TraceEvent]:
    """Each ``sync`` whose root is a global rank, with the host of that rank's own sync of
    the round instead (``rank N`` when it recorded none: it died first)."""
    host_of = {(e.get("round"), e.get("rank")): e.host for e in events if e.kind == "sync"}
    out = []
    for e in events:
        root = e.get("root") if e.kind == "sync" else None
        if isinstance(root, int):
            named = host_of.get((e.get("round"), root), f"rank {root}")
            e = TraceEvent(e.t, e.host, e.proc, e.kind, {**e.data, "root": named})
        out.append(e)
    return out


def last_steps(events: Sequence[TraceEvent]) -> dict[str, int]:
    """Host -> the step of its workers' last ``step`` event."""
    out: dict[str, int] = {}
    for e in sorted((e for e in events if e.kind == "step"), key=lambda e: e.t):
        out[e.host] = int(e.get("step", 0))
    return out


WORKER = re.compile(r"[^/]+/w\d+")
"""A worker's process name (``hN/wK``)."""
PROBE = "elastic_sim.probe"
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "progress_after_faults": (("step",), f"steps ({PROBE}.step)"),
    "committed_progress": (("commit", "restore"), f"commits or restores ({PROBE}.commit, "
                                                  ".restore)"),
    "state_agreement": (("sync",), f"syncs ({PROBE}.sync)"),
    "collective_sequence": (("coll_enter",), f"collectives ({PROBE}.collective)"),
    "epoch_isolation": (("coll_enter",), f"collectives ({PROBE}.collective)"),
}
"""Checks that judge the workers' own events: the kinds each needs, and why it is not
judged without them."""


def unrecorded(events: Sequence[TraceEvent]) -> dict[str, str]:
    """The checks a user's script leaves unjudged, with why: those whose events its workers
    did not record (a script records them through :mod:`elastic_sim.probe`); a sync
    without the state's digest leaves ``state_agreement`` unjudged too."""
    kinds = {e.kind for e in events if WORKER.fullmatch(e.proc)}
    if "proc_start" not in kinds:
        return {name: f"the script records nothing of its training (it does not import "
                      f"{PROBE}: README, 'Your own training script')" for name in NEEDS}
    out = {name: f"the script's workers recorded no {what} (not called, or never reached)"
           for name, (needs, what) in NEEDS.items() if not kinds & set(needs)}
    syncs = [e for e in events if e.kind == "sync" and WORKER.fullmatch(e.proc)]
    if syncs and not any(e.get("digest") for e in syncs):
        out["state_agreement"] = (f"the script's syncs carry no state ({PROBE}.sync(step, "
                                  "state)): members' states cannot be compared")
    return out


def instrumented(events: Sequence[TraceEvent]) -> bool:
    """Whether the workers write their own events (the bundled worker, or a script that
    imports :mod:`elastic_sim.probe`)."""
    return any(e.kind == "proc_start" and WORKER.fullmatch(e.proc) for e in events)
