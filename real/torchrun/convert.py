"""An upstream torchrun run as the project's trace: from torchelastic's own streams (the
rendezvous events of its events API, the agents' log records: rendezvous results, restarts,
worker exit records, exit barrier; how each ``torchrun`` main returned), the workers' own
events (the bundled worker's, or a script's through :mod:`elastic_sim.probe`;
:mod:`.workers`), and the injector's fault events. All times become run time (seconds
since the launcher's ``t0``).

What upstream does not record is not made up: a round's member list is rebuilt from each
agent's own (round, rank, world size) report (no agent reports the list it agreed to), and
there is no ``rdzv_complete`` (the instant a round's membership is decided is not in any
stream); :data:`NOT_JUDGED` says which checks this leaves unjudged.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_sim.real.torchrun.workers import (
    CLOSING,
    AgentView,
    Ends,
    last_steps,
    worker_events,
)
from elastic_sim.trace import TraceEvent

NOT_JUDGED = {
    "membership_agreement": "upstream's rendezvous events give each agent's rank and world "
    "size, not the member list it agreed to; the members here are rebuilt from the ranks, "
    "so their agreement cannot be judged",
    "rendezvous_closed_by_job_end": "upstream's streams record when the rendezvous was "
    "closed but not when launch_agent's run returned (the job's end comes later, when "
    "torchrun's main returns), so the order cannot be judged",
}
"""Checks that upstream's events cannot judge, with why (every torchrun run)."""

_JOIN = re.compile(r"attempts to join the next round")
_JOINED = re.compile(r"has joined round (\d+) of .* as rank (\d+) in a world of size (\d+)")
_CLOSED = re.compile(r"has closed the rendezvous")
_COMPLETE = re.compile(r"Rendezvous complete for workers")
_FIELD = re.compile(r"^\s*(\w+)=(.*)$", re.M)
COUNTED_RESTART = re.compile(r"Worker group (\w+)\. (\d+)/(\d+) attempts left")
_WAITING = re.compile(r"Detected (\d+) new nodes from group_rank=(\d+)")
EXIT_RECORD = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_DEATH = re.compile(r"Received (\S+) death signal")
_BARRIER = re.compile(r"Local worker group finished")
_BARRIER_DONE = re.compile(r"Done waiting for other agents")
_BARRIER_FAILED = re.compile(r"Error waiting on exit barrier")
_STARTING = re.compile(r"Starting worker group")


@dataclass
class Inputs:
    """Everything the conversion reads."""

    t0: float
    hosts: list[str]
    addresses: dict[str, str]
    streams: dict[str, Path]
    """Host -> its agent's stream file."""
    worker_files: list[Path]
    launcher_events: list[TraceEvent]
    """The injector's fault events (already in run time)."""
    agent_codes: dict[str, int]
    agent_exit_t: dict[str, float]
    killed: dict[str, tuple[float, str]] = field(default_factory=dict)
    """Process or host name -> (run time, fault id) of the injector's kills."""
    end: float = 0.0


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a stream or worker file (none if it does not exist; a torn last
    line, of a process killed mid-write, left out)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line of a killed process
    return out


class _Agent:
    """One host's agent stream turned into events."""

    def __init__(self, host: str, inp: Inputs, master_of: Mapping[str, str]) -> None:
        self.host, self.proc, self.inp = host, f"{host}/main", inp
        self.master_of = master_of
        self.round = -1
        self.events: list[TraceEvent] = []
        self.done: list[TraceEvent] = []
        self.workers = AgentView()
        """What the stream says of its workers' ends."""
        self.ckpt_step: bool = False
        """Whether its end said the host's checkpoint's step (the bundled worker's)."""

    def ev(self, t: float, kind: str, **data: Any) -> TraceEvent:
        e = TraceEvent(t - self.inp.t0, self.host, self.proc, kind, data)
        self.events.append(e)
        return e

    def feed(self, ln: Mapping[str, Any]) -> None:
        t = float(ln.get("t", self.inp.t0))
        src = ln.get("src")
        if src == "event":
            self._rdzv(t, ln.get("event") or {})
        elif src == "log":
            self._log(t, str(ln.get("text", "")))
        elif src == "end":
            self._end(t, ln)

    def _rdzv(self, t: float, event: Mapping[str, Any]) -> None:
        msg = str(event.get("message", ""))
        if _JOIN.search(msg):
            self.ev(t, "rdzv_join", round=self.round + 1)
        elif m := _JOINED.search(msg):
            self.round = int(m.group(1))
            self.done.append(self.ev(t, "rdzv_done", round=self.round, rank=int(m.group(2)),
                                     world_size=int(m.group(3))))
        elif _CLOSED.search(msg):
            self.ev(t, "rdzv_shutdown", closed=True)
        elif event.get("node_state") == "FAILED":
            self.ev(t, "rdzv_failed", round=self.round + 1, error=msg.split("\n")[0][:300])

    def _log(self, t: float, text: str) -> None:
        if _COMPLETE.search(text):
            fields = dict(_FIELD.findall(text))
            if self.done and "master_addr" in fields:
                addr = fields["master_addr"].strip()
                last = self.done[-1]
                idx = self.events.index(last)
                self.events[idx] = self.done[-1] = TraceEvent(
                    last.t, last.host, last.proc, last.kind,
                    {**last.data, "master": f"{self.master_of.get(addr, addr)}:"
                                            f"{fields.get('master_port', '').strip()}"})
        elif _STARTING.search(text):
            self.ev(t, "workers_started", round=self.round)
        elif m := COUNTED_RESTART.search(text):
            self.ev(t, "agent_restart", reason=m.group(1), remaining_restarts=int(m.group(2)) - 1)
        elif m := _WAITING.search(text):
            self.ev(t, "agent_restart", reason="nodes_waiting", nodes_waiting=int(m.group(1)))
        elif m := EXIT_RECORD.search(text):
            self.workers.exit_records[int(m.group(3))] = (t, int(m.group(1)))
        elif m := CLOSING.search(text):
            self.workers.closed[int(m.group(1))] = (t, m.group(2))
        elif m := _DEATH.search(text):
            self.ev(t, "agent_signal", signal=_signal_name(m.group(1)))
        elif _BARRIER.search(text):
            self.workers.succeeded.append(t)
            self.ev(t, "exit_barrier_enter", round=self.round)
        elif _BARRIER_DONE.search(text):
            self.ev(t, "exit_barrier_done", round=self.round)
        elif _BARRIER_FAILED.search(text):
            self.ev(t, "exit_barrier_failed", error="exit barrier")

    def _end(self, t: float, ln: Mapping[str, Any]) -> None:
        ckpt = ln.get("checkpoint") or {}
        self.ckpt_step = "step" in ckpt
        if int(ln.get("code", 1)) == 0:
            self.ev(t, "job_done", step=int(ckpt.get("step", 0)),
                    digest=str(ckpt.get("digest", "")))
        else:
            self.ev(t, "job_failed", error=str(ln.get("error") or f"exit {ln.get('code')}"))


def _signal_name(text: str) -> str:
    """``15`` or ``Signals.SIGTERM`` -> ``TERM`` (as the model records it)."""
    try:
        return signal.Signals(int(text)).name.removeprefix("SIG")
    except ValueError:
        return text.rpartition(".")[2].removeprefix("SIG")


def convert(inp: Inputs) -> list[TraceEvent]:
    """The run's events in run-time order (ties keep the source order)."""
    master_of = {addr: h for h, addr in inp.addresses.items()}
    agents = {h: _Agent(h, inp, master_of) for h in inp.hosts}
    for h, path in inp.streams.items():
        for ln in lines(path):
            agents[h].feed(ln)
    _fill_members(agents)
    workers = worker_events([lines(p) for p in sorted(inp.worker_files)],
                            {h: a.workers for h, a in agents.items()},
                            Ends(inp.t0, inp.killed, inp.agent_exit_t, inp.end))
    _final_steps(agents, last_steps(workers))
    events: list[TraceEvent] = list(inp.launcher_events)
    for h in inp.hosts:
        events.append(TraceEvent(0.0, h, f"{h}/main", "proc_start",
                                 {"entry": "torchrun (torch.distributed.run.main)"}))
        events.extend(agents[h].events)
    events.extend(workers)
    for h in inp.hosts:
        code = inp.agent_codes.get(h, -9)
        kill = inp.killed.get(h) or inp.killed.get(f"{h}/main")
        reason = (f"killed by fault {kill[1]}" if kill and code < 0
                  else f"exited with code {code}" if code >= 0 else f"signal {-code}")
        t = kill[0] if kill and code < 0 else inp.agent_exit_t.get(h, inp.end)
        events.append(TraceEvent(t, h, f"{h}/main", "proc_exit", {"code": code,
                                                                   "reason": reason}))
    return sorted(events, key=lambda e: e.t)


def _final_steps(agents: Mapping[str, _Agent], last: Mapping[str, int]) -> None:
    """A host's ``job_done`` without its checkpoint's step (a user's script keeps its own
    checkpoint) says the last step its workers recorded."""
    for h, a in agents.items():
        if a.ckpt_step or h not in last:
            continue
        for i, e in enumerate(a.events):
            if e.kind == "job_done":
                a.events[i] = TraceEvent(e.t, e.host, e.proc, e.kind, {**e.data, "step": last[h]})


def _fill_members(agents: Mapping[str, _Agent]) -> None:
    """Give each rdzv_done the round's members, rebuilt from every agent's own report."""
    ranks: dict[int, list[tuple[int, str]]] = {}
    for a in agents.values():
        for e in a.done:
            ranks.setdefault(int(e.get("round")), []).append((int(e.get("rank")), a.host))
    for a in agents.values():
        for i, e in enumerate(a.events):
            if e.kind == "rdzv_done":
                members = [h for _, h in sorted(ranks[int(e.get("round"))])]
                a.events[i] = TraceEvent(e.t, e.host, e.proc, e.kind,
                                         {**e.data, "members": members})


def exit_codes(events: Sequence[TraceEvent]) -> dict[str, int]:
    """Each process's last exit code, by process name (workers by their last generation)."""
    codes: dict[str, int] = {}
    for e in events:
        if e.kind == "proc_exit":
            codes[e.proc] = int(e.get("code", -9))
    return codes
