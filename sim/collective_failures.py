"""How the sim's collectives fail: a member's death (with each survivor's detection latency
drawn from the group's own random stream), a powered-off member that vanishes, timeouts,
aborts and connection resets.

These are the methods of :class:`CollectiveFailures`, a mixin of
:class:`~elastic_sim.sim.collectives.CollectiveEngine` (which matches, prices and completes the
collectives; see its module docstring for the model).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api import CollectiveFailed, CollectiveTimeout
from elastic_sim.sim.collective_state import BROKEN, DONE, Entry, GroupState, Member, _Op
from elastic_sim.sim.tasks import Waiter, wake_all
from elastic_sim.world import ASYNC_ERROR_HANDLING, TEAR_DOWN_MODES, WATCHDOG_ABORT_CODE

if TYPE_CHECKING:
    from elastic_sim.sim.host import SimProcess
    from elastic_sim.sim.kernel import Kernel
    from elastic_sim.world import CollectiveModel


class CollectiveFailures:
    """Mixin of :class:`~elastic_sim.sim.collectives.CollectiveEngine`: failing, timing out and
    aborting members' calls (what the engine provides is declared for the type checker
    only)."""

    if TYPE_CHECKING:
        k: Kernel
        model: CollectiveModel
        seed: int
        groups: dict[tuple[int, str], GroupState]
        blocked: dict[int, _Op]

        kill: Callable[[SimProcess, int, str], None] | None

        def _stalled(self, e: Entry) -> bool: ...

    def _raise(self, e: Entry, exc: BaseException) -> None:
        """End ``e`` with the error ``exc``: raised in its process, or, where the backend's
        watchdog tears the process down (NCCL's, in a process that asks for it with
        TORCH_NCCL_ASYNC_ERROR_HANDLING: :data:`~elastic_sim.world.ASYNC_ERROR_HANDLING`),
        seen by it (its trace records the failure, as the watchdog logs it) and then the
        process aborts at once, whatever it does with the error. A group's creation is not
        the watchdog's (it waits on the store and raises), nor is a frozen process's error
        (its watchdog thread is frozen too: it sees the error raised when it runs again).
        A process whose GPU wedged sees nothing: it is stuck inside the call, and so is its
        watchdog (:mod:`elastic_sim.sim.heartbeat`)."""
        proc = e.member.proc
        if proc.gpu_wedged:
            return
        mode = proc.env.get(ASYNC_ERROR_HANDLING)
        if (self.kill is None or not self.model.tears_down or e.kind == "init"
                or mode not in TEAR_DOWN_MODES or not proc.alive or not proc.runnable):
            e.resolve(exc=exc, direct=True)
            return
        reason = (f"{exc}; the NCCL watchdog tore the process down "
                  f"({ASYNC_ERROR_HANDLING}={mode}, SIGABRT)")
        proc.torn_down = (WATCHDOG_ABORT_CODE, reason)
        e.resolve(exc=exc, direct=True)
        if proc.alive:  # it caught the error, or is still unwinding
            self.kill(proc, WATCHDOG_ABORT_CODE, reason)

    def _forget(self, e: Entry) -> None:
        if e.deadline is not None:
            e.deadline.cancel()
            e.deadline = None  # no entry <-> timer cycle
        e.member.pending.pop(id(e), None)
        e.member.group.pending.pop(id(e), None)

    def _settle_all(self, outcomes: Iterable[tuple[Entry, Any, BaseException | None]]
                    ) -> None:
        """Settle each entry with its (value, error), in that order, and wake the tasks that
        await them together after the current step (one scheduled callback)."""
        wake: list[Waiter] = []
        for e, value, exc in outcomes:
            self._forget(e)
            e.op = None  # no entry <-> op cycle
            w = e.settle(value, exc)
            if w is not None:
                wake.append(w)
        if wake:
            self.k.soon(wake_all, wake)

    def _drop_calls(self, m: Member) -> None:
        """``m``'s process is gone: its pending calls end, with nobody to wake."""
        for e in list(m.pending.values()):
            self._forget(e)
            e.settle()

    def _timeout(self, e: Entry) -> None:
        if e.done:
            return
        if self._stalled(e):  # a negotiated group waits on a stall: no timeout applies
            e.deadline = self.k.call_later(e.member.timeout, self._timeout, e)
            return
        self._forget(e)
        op = e.op
        if op is not None and op.state != DONE:
            op.state = BROKEN
            self.blocked.pop(op.uid, None)
        g = e.member.group
        self._raise(e, CollectiveTimeout(f"group {g.name}: {e.kind} timed out"))

    def _fail_later(self, e: Entry, death: float, dead_rank: int) -> None:
        m = e.member
        g = m.group
        slow, fast = g.detect[m.rank]
        at = max(e.t, death + (m.timeout if slow else fast))
        if at < e.t + m.timeout:
            self.k.call_at(at, self._fail, e, dead_rank)

    def _fail(self, e: Entry, dead_rank: int) -> None:
        if e.done:
            return
        self._forget(e)
        g = e.member.group
        self._raise(e, CollectiveFailed(f"group {g.name}: a peer died", peer=dead_rank))

    def _died(self, m: Member) -> None:
        """``m`` left the group (its process ended or it aborted)."""
        if m.dead:
            return
        m.dead = True
        m.died_at = self.k.now
        self._drop_calls(m)
        g = m.group
        first = g.dead_at is None
        if first:
            g.dead_at = m.died_at
            g.dead_rank = m.rank
            rng = random.Random(f"{self.seed}/collectives/{g.label}")
            p, fast_max = self.model.detect_slow_prob, self.model.detect_fast_max
            g.detect = [(rng.random() < p, rng.uniform(0.0, fast_max)) for _ in range(g.size)]
        for op in [g.init, *g.ops.values(), *g.p2p.values()]:
            if op.state != DONE and (op.seq != -1 or m in op.members or op is g.init):
                op.state = BROKEN
                self.blocked.pop(op.uid, None)
        for e in list(g.pending.values()):  # the survivors' calls (m's are gone)
            if e.kind in ("send", "recv"):
                if e.peer == m.rank:
                    self._fail_later(e, m.died_at, m.rank)
            elif first:
                self._fail_later(e, m.died_at, m.rank)

    def _vanished(self, m: Member) -> None:
        """``m``'s host was powered off: its own calls go with it, and the survivors are
        told nothing; their collectives cannot complete (it never runs again), so each
        times out at its own deadline, as with a hung peer."""
        self._drop_calls(m)

    def reset(self, crosses: Callable[[str, str], bool]) -> None:
        """The connections between hosts ``x`` and ``y`` with ``crosses(x, y)`` are reset:
        each member with such a peer fails its calls now, as an abort (Gloo's pair sees
        ECONNRESET), and the others see it leave."""
        hit = []
        for g in self.groups.values():
            live = [m for m in g.members if m is not None and not (m.dead or m.aborted)]
            for m in live:
                here = m.proc.host.name
                if any(x.proc.host.name != here and crosses(here, x.proc.host.name)
                       for x in live):
                    hit.append(m)
        for m in hit:
            self.abort(m, "connection reset by peer")

    def abort(self, m: Member, why: str = "aborted") -> None:
        """``m`` aborts: its own pending calls fail now; the others see it die."""
        if m.aborted:
            return
        m.aborted = True
        m.abort_reason = why
        self._settle_all((e, None, CollectiveFailed(f"group {m.group.name}: {why}"))
                         for e in list(m.pending.values()))
        self._died(m)
