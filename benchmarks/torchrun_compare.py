"""Real ``torchrun`` next to elastic-sim, on the same two faults and the same timeouts.

For each scenario it runs actual ``torchrun`` (c10d rendezvous, agents on loopback, the
store hosted by agent 0 through ``--rdzv-conf is_host=1``), injects the fault by SIGKILL,
and records the membership sequence (the worlds whose workers started, one per rendezvous
round, in order: node count, worker count, ranks, restart counts, steps) and the recovery
time: fault to the first training step of the new world, as elastic-sim's metrics define
it. Hosts, knobs (``--rdzv-conf`` timeouts, max restarts, monitor interval), step time and
the fault come from elastic-sim's scenario YAML, which it then runs in sim and in real mode
(medians over seeds and runs), reading the same two things from summary.json.

- worker_crash: SIGKILL one worker; its agent stays alive and restarts the group.
- scale_down: SIGKILL one agent that does not host the store, and its workers.

Every process this script starts carries a marker in its environment; whatever happens,
all of them are killed before the script returns (agents' process groups first, then any
marked process left, workers included: torchrun starts workers in their own sessions).

    python benchmarks/torchrun_compare.py [--trials 3] [--sim-seeds 5] [--real-runs 3]
        [--scenarios worker_crash scale_down] [--modes sim real] [--render]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
WORKER = ROOT / "benchmarks" / "torchrun_worker.py"
RESULTS = ROOT / "benchmarks" / "results"
MARKER = "TORCHRUN_COMPARE_MARKER"
TARGET_MARGIN = 0.25
"""Target: recovery times within 25% of each other."""


RDZV_CONF_KEYS = ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
                  "keep_alive_interval", "keep_alive_max_attempt")
"""Scenario knobs that torchrun takes through ``--rdzv-conf`` (integer seconds upstream)."""


@dataclass(frozen=True)
class Setup:
    """One scenario as torchrun runs it, read from elastic-sim's YAML of the same fault."""

    name: str
    yaml: str
    fault: str
    """"worker_crash" (SIGKILL one worker) or "scale_down" (SIGKILL one agent and its
    workers)."""
    agents: int
    nproc: int
    min_nodes: int
    max_nodes: int
    target_agent: int
    """Index of the agent hit (host hN is agent N; agent 0 hosts the rendezvous store)."""
    target_local_rank: int
    rdzv_conf: tuple[tuple[str, int], ...]
    max_restarts: int
    monitor_interval: float
    step_s: float
    pg_timeout: float
    warm_steps: int = 5
    after_steps: int = 5

    def rdzv_conf_arg(self, agent: int) -> str:
        """``--rdzv-conf`` for one agent: is_host pins the store to agent 0."""
        return ",".join([f"is_host={1 if agent == 0 else 0}",
                         *(f"{k}={v}" for k, v in self.rdzv_conf)])


def setup_from_yaml(name: str, yaml_path: str) -> Setup:
    """Hosts, knobs, step time and the fault of an elastic-sim torchelastic scenario."""
    import yaml

    doc = yaml.safe_load((ROOT / yaml_path).read_text())
    knobs = doc["protocol"]["knobs"]
    hosts = int(doc["cluster"]["hosts"])
    if doc["cluster"].get("store_host", "h0") != "h0":
        raise ValueError(f"{yaml_path}: the store must be on h0 (agent 0 is the host)")
    fault = doc["faults"][0]
    if fault["type"] == "crash_process":
        host, proc = str(fault["proc"]).split("/")
        kind, local_rank = "worker_crash", int(proc.lstrip("w"))
    elif fault["type"] == "crash":
        host, kind, local_rank = str(fault["host"]), "scale_down", 0
    else:
        raise ValueError(f"{yaml_path}: fault type {fault['type']!r} is not compared")
    return Setup(
        name=name, yaml=yaml_path, fault=kind, agents=hosts,
        nproc=int(knobs.get("nproc_per_node", 1)),
        min_nodes=int(knobs.get("min_nodes", hosts)), max_nodes=int(knobs.get("max_nodes", hosts)),
        target_agent=int(host.lstrip("h")), target_local_rank=local_rank,
        rdzv_conf=tuple((k, int(knobs[k])) for k in RDZV_CONF_KEYS if k in knobs),
        max_restarts=int(knobs.get("max_restarts", 0)),
        monitor_interval=float(knobs.get("monitor_interval", 0.1)),
        step_s=float(doc["workload"]["step_time"]),
        pg_timeout=float(knobs.get("pg_timeout", 1800)),
    )


SCENARIOS = {
    "worker_crash": "scenarios/torchelastic/worker_crash.yaml",
    "scale_down": "scenarios/torchelastic/scale_down.yaml",
}


@dataclass
class World:
    """The workers started for one rendezvous round (a world), whether or not it trained."""

    id: int
    """The rendezvous round."""
    spawned: float
    """When its first worker process started (before ``import torch``)."""
    first_step: float | None
    nodes: int
    workers: int
    ranks: list[list[int]]
    """[group_rank, local_rank, rank] of every member, sorted."""
    restarts: list[int]
    """TORCHELASTIC_RESTART_COUNT of every member (counted per agent upstream)."""
    steps: int


@dataclass
class Trial:
    """What one torchrun trial observed."""

    fault_at: float | None = None
    recovery_s: float | None = None
    workers_started_s: float | None = None
    """Fault to the first new worker process (detect, stop, re-rendezvous, spawn); the
    rest of the recovery is the new workers' start-up (interpreter, import torch, init)."""
    worlds: list[World] = field(default_factory=list)
    error: str | None = None

    @property
    def membership(self) -> list[int]:
        """Node count of every world, in order."""
        return [w.nodes for w in self.worlds]


# ------------------------------------------------------------------------------------------
# Processes: start marked, find by marker, always clean up.
# ------------------------------------------------------------------------------------------


def marked_pids(marker: str) -> list[int]:
    """Our processes whose environment carries this marker (others are unreadable)."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


@contextlib.contextmanager
def cluster(setup: Setup, log_dir: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start the agents; on exit (normal or not) stop and reap every marked process."""
    marker = uuid.uuid4().hex
    port = _free_port()
    env = dict(os.environ, **{MARKER: marker}, PYTHONUNBUFFERED="1",
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    agents: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(setup.agents):
            cmd = [
                str(VENV_BIN / "torchrun"),
                f"--nnodes={setup.min_nodes}:{setup.max_nodes}",
                f"--nproc-per-node={setup.nproc}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=compare", f"--rdzv-conf={setup.rdzv_conf_arg(i)}",
                f"--max-restarts={setup.max_restarts}",
                f"--monitor-interval={setup.monitor_interval}",
                "--local-addr=127.0.0.1",
                str(WORKER), str(log_dir), str(setup.step_s), str(setup.pg_timeout),
                f"127.0.0.1:{port}", "compare",
            ]
            out = (log_dir / f"agent{i}.log").open("wb")
            agents.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True, cwd=ROOT))
            out.close()
            if i == 0:
                time.sleep(0.5)  # agent 0 hosts the store: let it listen first
        yield agents
    finally:
        for a in agents:  # SIGTERM: torchrun stops its workers itself
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(a.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(a.poll() is None for a in agents):
            time.sleep(0.1)
        for _ in range(3):
            left = marked_pids(marker)
            if not left:
                break
            for pid in left:
                _kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for a in agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                a.wait(timeout=5)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------
# Logs -> worlds.
# ------------------------------------------------------------------------------------------


def read_lines(log_dir: Path) -> list[dict[str, Any]]:
    """Every JSON line the workers wrote (a torn last line is skipped)."""
    out = []
    for path in sorted(log_dir.glob("worker-*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


def worlds_of(lines: list[dict[str, Any]]) -> list[World]:
    """The worlds whose workers started, in the order they started."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for ln in lines:
        if ln["kind"] in ("spawn", "step"):
            by_round.setdefault(int(ln["round"]), []).append(ln)
    worlds = []
    for rnd, lns in by_round.items():
        members = {ln["pid"]: ln for ln in lns}
        steps = [ln for ln in lns if ln["kind"] == "step"]
        worlds.append(World(
            id=rnd,
            spawned=min(ln["t"] for ln in lns),
            first_step=min((ln["t"] for ln in steps), default=None),
            nodes=max(ln["group_world_size"] for ln in lns),
            workers=max(ln["world_size"] for ln in lns),
            ranks=sorted([m["group_rank"], m["local_rank"], m["rank"]] for m in members.values()),
            restarts=sorted(m["restart"] for m in members.values()),
            steps=max((ln["step"] for ln in steps), default=0),
        ))
    return sorted(worlds, key=lambda w: w.spawned)


def _wait_for(log_dir: Path, done: Any, timeout: float,
              agents: list[subprocess.Popen[bytes]]) -> list[World]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worlds = worlds_of(read_lines(log_dir))
        if done(worlds):
            return worlds
        if all(a.poll() is not None for a in agents):
            break
        time.sleep(0.05)
    raise TimeoutError("the expected world did not train in time")


# ------------------------------------------------------------------------------------------
# One torchrun trial.
# ------------------------------------------------------------------------------------------


def torchrun_trial(setup: Setup, log_dir: Path, startup_timeout: float = 120.0,
                   recovery_timeout: float = 90.0) -> Trial:
    """Start the agents, wait for training, inject the fault, wait for the new world."""
    trial = Trial()
    full = setup.agents * setup.nproc
    after = full if setup.fault == "worker_crash" else (setup.agents - 1) * setup.nproc
    try:
        with cluster(setup, log_dir) as agents:
            worlds = _wait_for(log_dir, lambda ws: any(
                w.workers == full and w.steps >= setup.warm_steps for w in ws),
                startup_timeout, agents)
            before = {w.id for w in worlds}
            lines = read_lines(log_dir)
            target_agent = agents[setup.target_agent].pid
            world = max(worlds, key=lambda w: w.spawned).id
            mine = {ln["local_rank"]: ln["pid"] for ln in lines
                    if ln["agent_pid"] == target_agent and ln["round"] == world}
            if setup.target_local_rank not in mine:
                raise RuntimeError("the target worker has not logged")
            victims = sorted(mine.values())
            trial.fault_at = time.time()
            if setup.fault == "worker_crash":
                _kill(mine[setup.target_local_rank], signal.SIGKILL)
            else:  # the whole host: its agent and its workers
                _kill(target_agent, signal.SIGKILL)
                for pid in victims:
                    _kill(pid, signal.SIGKILL)
            fault_at = trial.fault_at

            def recovered(ws: list[World]) -> bool:
                return any(w.id not in before and w.workers == after
                           and w.steps >= setup.after_steps for w in ws)

            worlds = _wait_for(log_dir, recovered, recovery_timeout, agents)
            trial.worlds = worlds
            new = [w for w in worlds if w.id not in before]
            trial.recovery_s = min(w.first_step for w in new if w.first_step) - fault_at
            trial.workers_started_s = min(w.spawned for w in new) - fault_at
    except (TimeoutError, RuntimeError) as exc:
        trial.error = str(exc)
        trial.worlds = worlds_of(read_lines(log_dir))
    return trial


# ------------------------------------------------------------------------------------------
# elastic-sim on the same scenario.
# ------------------------------------------------------------------------------------------


def elastic_sim_runs(yaml: str, mode: str, out: Path, seeds: int) -> dict[str, Any]:
    """``seeds`` runs (seeds 0, 1, ...): medians, plus every run's figures."""
    runs = [elastic_sim_run(yaml, mode, out / f"seed{k}", seed=k) for k in range(seeds)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0] if runs else {"error": "no runs"}

    def formed(r: dict[str, Any]) -> float | None:
        ph = r.get("phases") or {}
        d, z = ph.get("detect"), ph.get("rendezvous")
        return None if d is None or z is None else d + z

    rec = [r["recovery_s"] for r in ok if r.get("recovery_s") is not None]
    frm = [f for f in map(formed, ok) if f is not None]
    return {
        "runs": len(runs),
        "recovery_s": _median(rec),
        "recovery_s_runs": [r.get("recovery_s") for r in ok],
        "formed_s": _median(frm),
        "membership": sorted({str(r.get("membership")) for r in ok}),
        "outcomes": [r.get("outcome") for r in ok],
        "exit_codes": [r.get("exit_code") for r in ok],
        "errors": [r["error"] for r in runs if "error" in r],
        "each": runs,
    }


def elastic_sim_run(yaml: str, mode: str, out: Path, seed: int = 0,
                    timeout: float = 300.0) -> dict[str, Any]:
    """Run elastic-sim and read recovery and membership from its summary.json."""
    path = ROOT / yaml
    if not path.exists():
        return {"error": f"{yaml} does not exist (yet)"}
    cmd = [str(VENV_BIN / "elastic-sim"), "run", str(path), "--mode", mode, "--out", str(out),
           "--seed", str(seed), "--quiet", "--no-report"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"elastic-sim {mode} run exceeded {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    summary_path = out / "summary.json"
    if not summary_path.exists():
        return {"error": f"no summary.json (exit {proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()[-300:]}"}
    summary = json.loads(summary_path.read_text())
    metrics = summary.get("metrics", summary)
    recs = [r for r in metrics.get("recoveries", []) if r.get("recovery_s") is not None]
    return {
        "exit_code": proc.returncode,
        "wall_s": round(wall, 2),
        "recovery_s": recs[0]["recovery_s"] if recs else None,
        "phases": recs[0].get("phases") if recs else None,
        "membership": metrics.get("world_sizes"),
        "outcome": metrics.get("outcome"),
    }


# ------------------------------------------------------------------------------------------
# The table.
# ------------------------------------------------------------------------------------------


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def compare(setup: Setup, trials: int, work: Path, modes: list[str],
            es_runs: dict[str, int]) -> dict[str, Any]:
    """All trials of one scenario, torchrun and elastic-sim."""
    runs = []
    for k in range(trials):
        log_dir = work / f"{setup.name}-torchrun-{k}"
        log_dir.mkdir(parents=True)
        t = torchrun_trial(setup, log_dir)
        print(f"  torchrun trial {k}: recovery {_fmt(t.recovery_s)} s (new workers started "
              f"after {_fmt(t.workers_started_s)} s), membership "
              f"{t.membership}{'  ERROR ' + t.error if t.error else ''}", flush=True)
        runs.append(t)
    rec = [t.recovery_s for t in runs if t.recovery_s is not None]
    row: dict[str, Any] = {
        "scenario": setup.name,
        "setup": asdict(setup),
        "torchrun": {
            "recovery_s_median": _median(rec),
            "recovery_s": [t.recovery_s for t in runs],
            "workers_started_s": [t.workers_started_s for t in runs],
            "workers_started_s_median": _median(
                [t.workers_started_s for t in runs if t.workers_started_s is not None]),
            "membership": [t.membership for t in runs],
            "worlds": [[asdict(w) for w in t.worlds] for t in runs],
            "errors": [t.error for t in runs if t.error],
        },
    }
    for mode in modes:
        res = elastic_sim_runs(setup.yaml, mode, work / f"{setup.name}-{mode}",
                               es_runs[mode])
        print(f"  elastic-sim {mode}: recovery {res.get('recovery_s_runs')}, membership "
              f"{res.get('membership')}, outcomes {res.get('outcomes')} "
              f"{res.get('errors') or ''}", flush=True)
        row[f"elastic_sim_{mode}"] = res
        ref, got = row["torchrun"]["recovery_s_median"], res.get("recovery_s")
        res["within_25pct_of_torchrun"] = (
            None if ref is None or got is None else abs(got - ref) <= TARGET_MARGIN * ref)
    return row


def markdown(rows: list[dict[str, Any]], modes: list[str]) -> str:
    """The comparison as a markdown table: one line per scenario and run kind.

    Recovery splits at the new world's formation: for torchrun, fault to the first new
    worker process; for elastic-sim, its detect + rendezvous phases. The rest is start-up
    (interpreter, import torch, group init) and the first step."""
    head = ["scenario", "run", "recovery s", "fault → new world formed s",
            "start-up + first step s", "membership (nodes per world)", "within 25% of torchrun"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        tr = r["torchrun"]
        rec, spawn = tr["recovery_s_median"], tr["workers_started_s_median"]
        n = len(tr["recovery_s"])
        trials = ", ".join(_fmt(x) for x in tr["recovery_s"])
        memberships = sorted({str(m) for m in tr["membership"]})
        out.append("| " + " | ".join([
            r["scenario"], f"torchrun (median of {n}: {trials})", _fmt(rec), _fmt(spawn),
            _fmt(None if rec is None or spawn is None else rec - spawn),
            " / ".join(memberships), "—"]) + " |")
        for m in modes:
            es = r[f"elastic_sim_{m}"]
            if "error" in es:
                out.append(f"| {r['scenario']} | elastic-sim {m} | {es['error']} | | | | |")
                continue
            if "formed_s" in es:
                formed = es["formed_s"]
                each = ", ".join(_fmt(x) for x in es["recovery_s_runs"])
                label = f"elastic-sim {m} (median of {len(es['recovery_s_runs'])}: {each})"
                membership = " / ".join(es["membership"])
            else:  # one run, as the first results were recorded
                ph = es.get("phases") or {}
                formed = (None if ph.get("detect") is None or ph.get("rendezvous") is None
                          else ph["detect"] + ph["rendezvous"])
                label, membership = f"elastic-sim {m}", str(es.get("membership"))
            got = es.get("recovery_s")
            out.append("| " + " | ".join([
                r["scenario"], label, _fmt(got), _fmt(formed),
                _fmt(None if got is None or formed is None else got - formed),
                membership, str(es.get("within_25pct_of_torchrun"))]) + " |")
    return "\n".join(out) + "\n"


def header(doc: dict[str, Any]) -> str:
    """What was compared, when, and how busy the machine was."""
    load = doc["load"]
    return (f"torchrun {doc['torch']} (real, c10d, loopback) vs elastic-sim on the same "
            f"scenario YAMLs, {doc['started']}; load average before/after: "
            f"{load['before'][0]:.1f}/{load['after'][0]:.1f} on {load['cpus']} CPUs. "
            f"Recovery: fault to the first training step of the new world.\n\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS),
                   default=["worker_crash", "scale_down"])
    p.add_argument("--modes", nargs="*", default=["sim", "real"], choices=["sim", "real"])
    p.add_argument("--sim-seeds", type=int, default=5, help="elastic-sim sim runs (seeds)")
    p.add_argument("--real-runs", type=int, default=3, help="elastic-sim real runs")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--keep-logs", action="store_true", help="keep the per-run log dirs")
    p.add_argument("--render", action="store_true",
                   help="only rewrite the markdown from the JSON in --out")
    args = p.parse_args()
    if args.render:
        doc = json.loads((args.out / "torchrun_compare.json").read_text())
        text = header(doc) + markdown(doc["rows"], args.modes)
        (args.out / "torchrun_compare.md").write_text(text)
        print(text)
        return 0
    # A SIGTERM to this script unwinds through every cluster()'s cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="torchrun-compare-"))
    rows = []
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        for name in args.scenarios:
            print(f"{name}:", flush=True)
            rows.append(compare(setup_from_yaml(name, SCENARIOS[name]), args.trials, work,
                                args.modes, {"sim": args.sim_seeds, "real": args.real_runs}))
    finally:
        if args.keep_logs:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc = {"torch": _torch_version(), "started": started,
           "load": {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()},
           "rows": rows}
    text = header(doc) + markdown(rows, args.modes)
    print()
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "torchrun_compare.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "torchrun_compare.md").write_text(text)
    return 0


def _torch_version() -> str:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
