"""One Lighthouse schedule run twice: by torchft 0.2.0's own ``LighthouseServer`` on
loopback, driven by ``LighthouseClient`` heartbeats and quorum requests, and by the model's
:class:`~elastic_sim.protocols.torchft.lighthouse_rules.LighthouseCore` on a virtual clock;
what each shows after every operation and what each request is answered with, compared.

A schedule's operations happen at times on a grid of :data:`UNIT` seconds, one per point:
a heartbeat, a quorum request (a thread blocked in ``quorum`` until it is answered), or a
wait. Upstream's
thresholds are set half a unit (heartbeat timeout) and a quarter unit (join timeout) off the
grid, so nothing the Lighthouse decides by the clock happens near an operation: the
server's own tick (every :data:`TICK` seconds, at a phase of its own) and the model's
reach the same state before the next one. An *order* schedule has no waits and 60 s
thresholds, so only the order of its operations matters and it runs as fast as the server
answers.

After each operation the server's status page (``/status``: the quorum id, the reason
``quorum_compute`` gives now, and each heartbeat's age) is polled until it says what the
model says (or what the model's next ticks make of the operation within :data:`SETTLE`)
and shows the request handled (its replica's heartbeat is younger than the
request): a fence, so the next operation reaches the server after this one. Past
:data:`FENCE` seconds it is a disagreement.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from elastic_sim.protocols.torchft.lighthouse_rules import (
    LighthouseCore,
    LighthouseSettings,
    quorum_compute,
)
from elastic_sim.protocols.torchft.quorum import Quorum, QuorumMember

TORCHFT_VERSION = "0.2.0"
UNIT = 0.2
"""Seconds between two points of a timed schedule's grid."""
TICK = 0.01
"""The servers' quorum tick in timed schedules (seconds)."""
FENCE = 1.0
"""How long the server may take to show an operation's effect (seconds)."""
SETTLE = 0.15 * UNIT
"""How long after an operation the status page may already show what the server's next
ticks make of it (a heartbeat that completes a quorum, issued by the next tick): a loaded
machine polls the page later than a tick. Below the join timeout's quarter unit off the
grid, so no decision of the clock falls inside."""
LONG = 60.0
"""Thresholds no schedule reaches (the command line's join timeout)."""

Kind = Literal["hb", "ask", "wait"]


@dataclass(frozen=True)
class Op:
    """One operation: a heartbeat or a quorum request of ``replica`` (at ``step``, asking
    to shrink only), or a wait of ``units`` grid units."""

    kind: Kind
    replica: str = ""
    step: int = 0
    shrink: bool = False
    units: int = 0


@dataclass(frozen=True)
class Schedule:
    """Settings and operations. ``heartbeat_units``/``join_units`` None: :data:`LONG`."""

    min_replicas: int
    ops: tuple[Op, ...]
    heartbeat_units: int | None = None
    join_units: int | None = None

    @property
    def timed(self) -> bool:
        """Whether the clock matters (else only the order of operations does)."""
        return self.heartbeat_units is not None or self.join_units is not None

    def settings(self) -> LighthouseSettings:
        """The Lighthouse options, in seconds."""
        hb = LONG if self.heartbeat_units is None else (self.heartbeat_units + 0.5) * UNIT
        join = LONG if self.join_units is None else (self.join_units + 0.25) * UNIT
        return LighthouseSettings(self.min_replicas, join, TICK if self.timed else 0.1, hb)

    def times(self) -> list[float]:
        """When each operation happens (seconds from the start). In a timed schedule each
        heartbeat or request has a grid point of its own: heartbeats made at one point
        in the model would expire one after the other upstream (a few milliseconds
        apart), and the states in between can issue quorums."""
        out, now = [], 0.0
        for i, op in enumerate(self.ops):
            if op.kind == "wait":
                now += op.units * UNIT
            elif not self.timed:
                now = i * 1e-3
            elif i > 0 and self.ops[i - 1].kind != "wait":
                now += UNIT
            out.append(now)
        return out

    def ask_timeout(self) -> float:
        """The requests' timeout: past the schedule's end."""
        return self.times()[-1] + 2.0 if self.ops else 2.0


Answer = tuple[int, tuple[str, ...], tuple[int, ...]] | None
"""What a request was answered with: quorum id, members, their steps (None: nothing)."""
Status = tuple[int, str]
"""The quorum id and the next quorum's reason, as the status page shows them."""


def member(op: Op) -> QuorumMember:
    """The member a request of ``op`` sends (the client's fields)."""
    return QuorumMember(op.replica, f"addr-{op.replica}", f"store-{op.replica}", op.step, 1,
                        op.shrink)


def answer_of(q: Quorum) -> Answer:
    """A quorum as an answer."""
    return q.quorum_id, tuple(q.replica_ids), tuple(p.step for p in q.participants)


@dataclass
class Run:
    """What one side showed: the status after each operation, each request's answer."""

    statuses: list[Status] = field(default_factory=list)
    answers: dict[int, Answer] = field(default_factory=dict)
    by_clock: int = 0
    """Quorums a tick issued (a join timeout or a heartbeat's expiry), not a request."""
    arrived: dict[int, float] = field(default_factory=dict)
    """When each answered request got its answer (seconds from the start; real side)."""
    settled: dict[int, list[Status]] = field(default_factory=dict)
    """The statuses the model's ticks reach within :data:`SETTLE` after each operation
    (model side): what a status page polled a little late may show instead."""

    def allowed(self, i: int) -> list[Status]:
        """What the status after operation ``i`` may be."""
        return [self.statuses[i], *self.settled.get(i, [])]


def run_model(s: Schedule, phase: float = 0.0, until: float = 0.0) -> Run:
    """The model on a virtual clock, ticking every tick from ``phase`` on; after the last
    operation, on until ``until`` seconds from the start (the clock's quorums issued by
    then answer requests still waiting)."""
    settings = s.settings()
    core = LighthouseCore(settings)
    run = Run()
    timeout = s.ask_timeout()
    tick = phase
    last, settle_end = -1, -1.0

    def step() -> None:
        nonlocal tick
        issued = len(core.issued)
        _deliver(run, core.tick(tick))
        run.by_clock += len(core.issued) - issued
        if tick <= settle_end:
            now = (core.state.quorum_id, quorum_compute(tick, core.state, settings).reason)
            if now not in run.allowed(last):
                run.settled.setdefault(last, []).append(now)
        tick += settings.quorum_tick

    for i, (op, t) in enumerate(zip(s.ops, s.times(), strict=True)):
        while s.timed and tick < t:
            step()
        if op.kind == "hb":
            core.heartbeat(t, op.replica)
        elif op.kind == "ask":
            run.answers[i] = None
            _deliver(run, core.request(t, member(op), i, t + timeout))
        if not s.timed:
            _deliver(run, core.tick(t))
        run.statuses.append((core.state.quorum_id, quorum_compute(t, core.state,
                                                                 settings).reason))
        last, settle_end = i, t + SETTLE
    while s.timed and (tick <= until or tick <= settle_end):
        step()
    return run


def _deliver(run: Run, answers: list[tuple[object, Quorum]]) -> None:
    for token, quorum in answers:
        assert isinstance(token, int)
        run.answers[token] = answer_of(quorum)


STATUS = re.compile(r"Current quorum_id: (-?\d+).*?Next quorum status: ([^\n<]*)", re.S)
SEEN = re.compile(r"(\S+): seen ([0-9.]+)(ns|µs|us|ms|s) ago")
"""A heartbeat on the status page (a Rust ``Duration`` as ``Debug`` writes it)."""
SECONDS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def load() -> Any:
    """torchft's Rust bindings (callers skip when torchft is absent or another version)."""
    import importlib.metadata

    from torchft import _torchft

    version = importlib.metadata.version("torchft")
    if version != TORCHFT_VERSION:
        raise ImportError(f"differential tests pin torchft {TORCHFT_VERSION}, found {version}")
    return _torchft


def skip_without_torchft() -> None:
    """Skip the calling test module, saying why, when torchft is absent or another
    version than the one the differential tests pin."""
    import pytest

    try:
        load()
    except ImportError as exc:
        pytest.skip(f"differential tests need torchft {TORCHFT_VERSION} (pip install "
                    f"torchft=={TORCHFT_VERSION}): {exc}", allow_module_level=True)


class RealLighthouse:
    """A real ``LighthouseServer`` on loopback and a client of it."""

    def __init__(self, s: Schedule) -> None:
        ft = load()
        st = s.settings()
        self.server = ft.LighthouseServer(
            bind="127.0.0.1:0", min_replicas=s.min_replicas,
            join_timeout_ms=round(st.join_timeout * 1000),
            quorum_tick_ms=round(st.quorum_tick * 1000),
            heartbeat_timeout_ms=round(st.heartbeat_timeout * 1000))
        self.port = int(self.server.address().rsplit(":", 1)[1])
        self.client = ft.LighthouseClient(f"http://127.0.0.1:{self.port}",
                                          timedelta(seconds=5))

    def status(self) -> tuple[Status, dict[str, float]]:
        """What its status page says now, and how old each heartbeat is (seconds)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status",
                                    timeout=FENCE) as f:
            page = f.read().decode()
        m = STATUS.search(page)
        assert m is not None, "the status page changed its format"
        ages = {r: float(x) * SECONDS[unit] for r, x, unit in SEEN.findall(page)}
        return (int(m.group(1)), m.group(2).strip()), ages

    def shutdown(self) -> None:
        """Stop it (requests still waiting time out on their own)."""
        self.server.shutdown()


def run_real(s: Schedule, expected: list[Run]) -> tuple[Run, list[threading.Thread]]:
    """The schedule against a real Lighthouse, each operation fenced on a status one of
    the ``expected`` model runs (one per tick phase) allows after it; the threads of
    requests still waiting at the end."""
    lh = RealLighthouse(s)
    run = Run()
    timeout = timedelta(seconds=s.ask_timeout())
    threads: list[threading.Thread] = []
    start = time.monotonic()
    try:
        for i, (op, t) in enumerate(zip(s.ops, s.times(), strict=True)):
            if s.timed:
                time.sleep(max(0.0, start + t - time.monotonic()))
            sent = time.monotonic()
            if op.kind == "hb":
                lh.client.heartbeat(op.replica)
            elif op.kind == "ask":
                run.answers[i] = None
                threads.append(_ask(lh.client, op, i, timeout, run, start))
            allowed = [st for model in expected for st in model.allowed(i)]
            run.statuses.append(_fence(lh, allowed,
                                       op.replica if op.kind == "ask" else "", sent))
        for i, want in expected[0].answers.items():
            deadline = time.monotonic() + (FENCE if want is not None else 0.05)
            while run.answers[i] is None and time.monotonic() < deadline:
                time.sleep(0.002)
    finally:
        lh.shutdown()
    return run, [t for t in threads if t.is_alive()]


def _ask(client: Any, op: Op, i: int, timeout: timedelta, run: Run,
         start: float) -> threading.Thread:
    def call() -> None:
        try:
            q = client.quorum(replica_id=op.replica, timeout=timeout,
                              address=f"addr-{op.replica}", store_address=f"store-{op.replica}",
                              step=op.step, world_size=1, shrink_only=op.shrink)
        except Exception:  # timed out, or the server went away: no answer
            return
        run.arrived[i] = time.monotonic() - start
        run.answers[i] = (int(q.quorum_id), tuple(p.replica_id for p in q.participants),
                          tuple(int(p.step) for p in q.participants))

    th = threading.Thread(target=call, daemon=True)
    th.start()
    return th


def _fence(lh: RealLighthouse, want: list[Status], asked: str, sent: float) -> Status:
    """Poll the status until it is one of ``want`` and, after a request of ``asked`` sent at
    ``sent``, shows its heartbeat as younger than that (so the server has handled it);
    what it was when it did, or when :data:`FENCE` seconds passed."""
    deadline = time.monotonic() + FENCE
    while True:
        got, ages = lh.status()
        handled = not asked or ages.get(asked, FENCE) < time.monotonic() - sent
        if (got in want and handled) or time.monotonic() >= deadline:
            return got
        time.sleep(0.002)


def disagreements(s: Schedule, real: Run, model: Run) -> list[str]:
    """Where the real Lighthouse and the model part ways (empty: nowhere)."""
    out = []
    for i, (got, want) in enumerate(zip(real.statuses, model.statuses, strict=True)):
        if got not in model.allowed(i):
            out.append(f"after op {i} {s.ops[i]}: real {got}, model {want}")
    for i, want in model.answers.items():
        if real.answers.get(i) != want:
            out.append(f"ask {i} {s.ops[i]}: real {real.answers.get(i)}, model {want}")
    return out


def by_clock(s: Schedule) -> int:
    """Quorums the model's clock issues in ``s`` (what a timed schedule exercises)."""
    return run_model(s).by_clock


def differ(s: Schedule, attempts: int = 2) -> list[str]:
    """Run ``s`` on both sides; the disagreements of the last attempt. A timed schedule
    whose model outcome depends on the tick's phase is compared with the outcome its real
    run matches, if any; one that disagrees is run again (up to ``attempts`` times): a
    machine too loaded to keep the schedule's margins disagrees once, a wrong rule every
    time. The last operation's answers are awaited a little past the schedule's end; a
    request the real server answered there (a loaded machine is late to look) is compared
    with what the model's clock issues by the time the answer arrived."""
    phases = (0.0, TICK / 3, 2 * TICK / 3) if s.timed else (0.0,)
    base = [run_model(s, phase) for phase in phases]
    found: list[str] = []
    for _ in range(attempts):
        real, _waiting = run_real(s, base)
        late = [t for i, t in real.arrived.items() if base[0].answers.get(i) is None]
        models = ([run_model(s, phase, until=max(late)) for phase in phases]
                  if s.timed and late else base)
        found = disagreements(s, real, models[0])
        for other in models[1:]:
            if not found:
                break
            alt = disagreements(s, real, other)
            found = alt if not alt else found
        if not found:
            return []
    return found
