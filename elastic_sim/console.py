"""What a person reads after a run: rounds, recoveries, checks, expectations, verdict."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from elastic_sim.pipeline import RunReport
from elastic_sim.reports.members import members_text
from elastic_sim.reports.metrics import PHASE_NAMES, Metrics, RoundInfo, goodput

OK = "[green]✓[/]"
BAD = "[red]✗[/]"
NA = "[dim]n/a[/]"
MARK = {"pass": OK, "fail": BAD, "n/a": NA}


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def print_report(r: RunReport, console: Console, verbose: bool = False) -> None:
    """The console summary of one run: the checks that hold in one line (each, with what
    it examined, when ``verbose``), the others in full."""
    sc, m = r.scenario, r.metrics
    console.print(
        f"[bold]elastic-sim run[/] {escape(sc.name)}  protocol={sc.protocol.label}  "
        f"mode={r.mode}  seed={r.seed}"
    )
    rounds = Table(title="Rounds", title_justify="left", box=None, pad_edge=False)
    for col in ("round", "formed at (s)", "nodes", "processes", "members (=rank)"):
        rounds.add_column(col)
    for rd in m.rounds:
        members = members_text(rd.members, rd.ranks)
        rounds.add_row(str(rd.round), _s(rd.formed_at), str(rd.nodes), str(rd.processes),
                       escape(members))
    console.print(rounds)
    console.print(f"World size (processes): [bold]{world_text(m.rounds)}[/]")
    setup = next((e for e in r.events if e.kind == "torchrun_setup"), None)
    if setup is not None and setup.get("unmapped"):
        kept = ", ".join(f"{k}={v}" for k, v in setup.get("unmapped").items())
        console.print(f"torchrun has no flag for these knobs; upstream's value applied: "
                      f"{escape(kept)}")
    if r.result.faults:
        faults = Table(title="Faults", title_justify="left", box=None, pad_edge=False)
        for col in ("fault", "at (s)", "fired", "recovery (s)", *PHASE_NAMES.values(),
                    "stalled (s)", "lost steps"):
            faults.add_column(col)
        recs = {rec.id: rec for rec in m.recoveries}
        for f in r.result.faults:
            rec = recs.get(f.id)
            ph = rec.phases() if rec else {}
            faults.add_row(
                escape(f"{f.id} ({f.type})"), _s(f.at),
                "yes" if f.fired else f"no: {escape(f.reason)}",
                _s(rec.recovery_s) if rec else "—",
                *(_s(ph.get(k)) for k in PHASE_NAMES),
                _s(rec.stall_s) if rec else "—",
                str(rec.lost_steps) if rec else "—",
            )
        console.print(faults)
    held = [c for c in r.checks if c.status == "pass" and not c.not_judged]
    console.print(f"[bold]Checks[/]: {len(held)} hold, "
                  f"{sum(c.status == 'fail' for c in r.checks)} failed, "
                  f"{len(r.checks) - len(held) - sum(c.status == 'fail' for c in r.checks)} "
                  "n/a")
    if held and not verbose:
        console.print(f"  {OK} {', '.join(c.name for c in held)} (-v: what each examined)")
    for c in r.checks:
        if c in held and not verbose:
            continue
        console.print(f"  {MARK[c.status]} {c.name}: {escape(c.description)} "
                      f"({c.examined})")
        for v in c.violations:
            console.print(f"      [red]{escape(v.message)}[/]")
            for ev in v.witness:
                console.print(f"        t={ev.t:.6f} {escape(ev.proc)} {ev.kind} "
                              f"{escape(str(dict(ev.data)))}")
    if r.contract is not None:
        _print_contract(r, console)
    if r.expectations:
        console.print("[bold]Expectations[/]")
        for e in r.expectations:
            console.print(f"  {OK if e.ok else BAD} {e.name}: expected {escape(e.expected)}, "
                          f"got {escape(e.actual)}")
    g = goodput(r.events, m.rounds, m.end_time, m.stalls, m.rollbacks)
    console.print(
        f"Outcome: [bold]{m.outcome}[/] after {m.steps_done} of {m.steps_total} steps, final "
        f"world {world_text(m.rounds[-1:])}, lost {m.lost_steps} steps ({m.lost_samples} "
        "samples)"
        f"{_never_done(m)}, goodput {100 * g.ratio:.1f} %, run time {m.end_time:.3f} s "
        f"({r.spec.backend.clock}), wall {r.wall_s:.2f} s"
    )
    for err in m.errors[:5]:
        console.print(f"  [yellow]{escape(err)}[/]")
    trace = escape(str(r.out_dir / "trace.jsonl"))
    console.print(f"Trace: {trace} ({r.result.trace_events} events) "
                  f"sha256 {r.result.trace_sha256}")
    console.print(f"Summary: {escape(str(r.out_dir / 'summary.json'))}")
    if r.report_files:
        console.print(f"Report: {escape(str(r.report_files[0]))}")
    if r.result.stopped:
        console.print(f"[bold red]STOPPED[/] ({r.result.stopped}): the run was ended early; "
                      "the trace holds what happened until then", markup=True)
    job = "" if m.outcome == "completed" else f"; the job {m.outcome}"
    console.print(("[bold green]PASS[/] (expectations met" if r.passed
                   else "[bold red]FAIL[/] (exit 1") + f"{job})")


def _never_done(m: Metrics) -> str:
    """What a job that did not complete never did."""
    return f", {m.unfinished_steps} never done" if m.unfinished_steps else ""


def world_text(rounds: Sequence[RoundInfo]) -> str:
    """The world of every round: its processes and, where it differs, its nodes."""
    return " -> ".join(f"{r.processes}" + (f" ({_n(r.nodes, 'node')})" if r.nodes != r.processes
                                           else "") for r in rounds) or "(no round)"


def _n(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _print_contract(r: RunReport, console: Console) -> None:
    """Which violations break the protocol's own promise and which are upstream's known
    weak spots (or fall outside the contract's fault assumptions)."""
    v = r.contract
    assert v is not None
    c = v.contract
    console.print(f"[bold]Contract[/] ({escape(c.protocol)}: every check but its "
                  f"{len(c.weak_spots)} known weak spots, if {escape(', '.join(c.assumptions))})")
    for name, why in v.broken_assumptions.items():
        console.print(f"  [yellow]assumption {escape(name)} broken[/]: {escape(why)}")
    broken = v.names("broken_promise")
    console.print(f"  {BAD if broken else OK} broke its own promise: "
                  f"{escape(', '.join(broken)) or 'none'}")
    for name in v.names("weak_spot"):
        console.print(f"  [yellow]![/] upstream's known weak spot {escape(name)}: "
                      f"{escape(c.weak_spots[name])}")
    outside = v.names("outside_contract")
    if outside:
        console.print(f"  [yellow]![/] outside the contract (faults broke an assumption): "
                      f"{escape(', '.join(outside))}")
