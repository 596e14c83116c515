"""Synthetic traces in the static protocol's vocabulary, so report tests need no runtime.

A world of ``hosts`` trains ``steps`` steps (one allreduce each, a commit every
``commit_every``); an optional crash at ``crash_at`` kills ``crash_host``: the survivors'
next allreduce fails ``detect`` seconds later, they restore the last commit, re-form a
round without it ``rendezvous`` seconds later, sync and finish.
"""

from __future__ import annotations

from typing import Any

from elastic_sim.reports.metrics import compute
from elastic_sim.trace import TraceEvent

SYNC_S = 0.005
COLL_S = 0.002


class _Trace:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def add(self, t: float, host: str, kind: str, proc: str | None = None, **data: Any) -> None:
        self.events.append(TraceEvent(round(t, 6), host, proc or f"{host}/main", kind, data))


def _form(tr: _Trace, members: list[str], rnd: int, t: float, step: int) -> float:
    """Rendezvous done at ``t``: group, sync at step ``step``; returns the sync time."""
    for rank, h in enumerate(members):
        tr.add(t, h, "rdzv_done", round=rnd, members=members, rank=rank,
               world_size=len(members))
        tr.add(t, h, "group_init", group=f"round{rnd}", rank=rank, size=len(members))
    t_sync = t + SYNC_S
    for rank, h in enumerate(members):
        tr.add(t + 0.001, h, "group_ready", group=f"round{rnd}", rank=rank, size=len(members))
        tr.add(t + 0.001, h, "coll_enter", group=f"round{rnd}", seq=0, op="allreduce",
               nbytes=8 * len(members))
        tr.add(t_sync, h, "coll_done", group=f"round{rnd}", seq=0, op="allreduce")
        tr.add(t_sync, h, "sync", round=rnd, rank=rank, root=members[0], step=step,
               digest=f"d{step}", root_digest=f"d{step}")
    return t_sync


def static_run(
    hosts: int = 4,
    steps: int = 60,
    step_time: float = 0.1,
    commit_every: int = 10,
    crash_host: str | None = "h3",
    crash_at: float = 2.55,
    detect: float = 0.1,
    rendezvous: float = 1.0,
    scenario: str = "synthetic",
) -> list[TraceEvent]:
    """The trace of a static-protocol run (see the module docstring)."""
    tr = _Trace()
    names = [f"h{i}" for i in range(hosts)]
    tr.add(0.0, "*", "run_start", "elastic-sim", scenario=scenario, seed=0, mode="sim")
    for h in names:
        tr.add(0.0, h, "proc_start", entry="elastic_sim.protocols.static.main:host_main")
        tr.add(0.001, h, "rdzv_join", round=0)
    members, rnd, step, committed = names, 0, 0, 0
    t = _form(tr, members, rnd, 0.003, 0)
    while step < steps:
        t_next = t + step_time
        seq = step - committed + 1 if rnd else step + 1
        if crash_host in members and crash_at < t_next:
            tr.add(crash_at, crash_host, "fault", "fault-injector", id=f"crash-{crash_host}",
                   type="crash", target=crash_host, phase="start")
            tr.add(crash_at, crash_host, "proc_exit", code=-9, reason="host crashed")
            members = [h for h in members if h != crash_host]
            t_fail = t_next + detect
            for h in members:
                tr.add(t_next - COLL_S, h, "coll_enter", group=f"round{rnd}", seq=seq,
                       op="allreduce", nbytes=72)
                tr.add(t_fail, h, "coll_fail", group=f"round{rnd}", seq=seq, op="allreduce",
                       error="CollectiveFailed")
                tr.add(t_fail, h, "restore", step=committed, digest=f"d{committed}",
                       reason="CollectiveFailed")
                tr.add(t_fail, h, "rdzv_join", round=rnd + 1)
            rnd, step = rnd + 1, committed
            t = _form(tr, members, rnd, t_fail + rendezvous, step)
            continue
        step += 1
        for h in members:
            tr.add(t_next - COLL_S, h, "coll_enter", group=f"round{rnd}", seq=seq,
                   op="allreduce", nbytes=72)
            tr.add(t_next, h, "coll_done", group=f"round{rnd}", seq=seq, op="allreduce")
            tr.add(t_next, h, "step", round=rnd, step=step)
            if step % commit_every == 0 or step == steps:
                tr.add(t_next, h, "commit", step=step, digest=f"d{step}")
        if step % commit_every == 0:
            committed = step
        t = t_next
    for h in members:
        tr.add(t, h, "job_done", step=step, digest=f"d{step}")
        tr.add(t + 0.001, h, "proc_exit", code=0, reason="returned")
    codes = {f"{h}/main": (0 if h in members else -9) for h in names}
    tr.add(t + 0.001, "*", "run_end", "elastic-sim", outcome="completed", exit_codes=codes)
    tr.events.sort(key=lambda ev: ev.t)
    return tr.events


def summary_for(events: list[TraceEvent], steps: int = 60, **extra: Any) -> dict[str, Any]:
    """A minimal summary.json for a synthetic trace (what the runner would write)."""
    run_end = next(ev for ev in events if ev.kind == "run_end")
    summary: dict[str, Any] = {
        "scenario": {"name": "synthetic", "description": "a synthetic run", "seed": 0,
                     "protocol": {"name": "static", "knobs": {"min_hosts": 2}},
                     "workload": {"steps": steps, "step_time": 0.1}},
        "seed": 0, "mode": "sim", "verdict": "pass", "exit_code": 0, "hung": False,
        "exit_codes": dict(run_end.get("exit_codes")),
        "trace": {"file": "trace.jsonl", "sha256": "0" * 64, "events": len(events)},
        "faults": [], "checks": [], "expectations": [],
        "metrics": compute(events, steps, dict(run_end.get("exit_codes")), False,
                           run_end.t).to_json(),
    }
    summary.update(extra)
    return summary


def hung_run(steps: int = 10, hang_at: float = 0.45, hang_s: float = 2.0) -> list[TraceEvent]:
    """A fault-free :func:`static_run` where h2 freezes from ``hang_at`` for ``hang_s``: the
    step after it completes ``hang_s`` late, nobody fails, no round is re-formed."""
    events = [ev if not (ev.kind in ("step", "commit", "coll_done", "job_done", "proc_exit",
                                     "run_end") and ev.t > hang_at)
              else TraceEvent(round(ev.t + hang_s, 6), ev.host, ev.proc, ev.kind, ev.data)
              for ev in static_run(crash_host=None, steps=steps)]
    for t, phase in ((hang_at, "start"), (hang_at + hang_s, "heal")):
        events.append(TraceEvent(t, "h2", "fault-injector", "fault",
                                 {"id": "freeze-h2", "type": "hang", "target": "h2",
                                  "phase": phase}))
    events.sort(key=lambda ev: ev.t)
    return events
