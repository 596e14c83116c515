"""Fast training stretches: a lockstep run of training steps as one event.

:meth:`elastic_sim.protocols.api.TracedGroup.train` is ``count`` steps of (sleep ``step_time``,
allreduce). When every member of a group enters the same ``train`` at the same instant
(they do: the collective before it woke them together), nothing differs between members
and nothing touches them, each step ends at the same instant for all of them: the sleep's
end ``e_i = c_(i-1) + step_time * slowdown + wake_latency``, the allreduce's end
``c_i = e_i + cost``. A stretch computes those instants (the same float additions the
fine-grained chain of timers makes), schedules one event at ``c_count``, and traces one
``train_steps`` summary per member (:func:`elastic_sim.trace.expand_stretches` turns it
back into the ``coll_enter``/``coll_done``/``step`` events the fine run has).

A ``train`` may name *marks*: steps after which each member does something that touches
no other member and awaits nothing (a torchelastic worker sends its checkpoint to its
agent). The stretch runs on through them: at a mark's instant ``c_i`` (one event) it traces
each member's summary of the steps since the last mark, as a stretch ending there would,
hands each member those steps' sums and lets it act (:meth:`Arrival.reached`), in rank
order, as the members' tasks would resume then. The trace is the one a stretch per mark
would make.

What could touch a stretch is a fault (each fault's start and heal), a process killed,
signalled, stopped or a host paused, crashed or resumed: every one of them calls
:meth:`StretchBook.split_all` first, which ends each running stretch at that instant ``t``
exactly as the fine run stands then: the steps done (``c_i < t``) are summarised, and each
member is either still in the next step's sleep (it wakes at ``e_(k+1)``) or inside its
allreduce, entered at ``e_(k+1)`` (a real entry, backdated, with its deadline at
``e_(k+1) + timeout``), so the touch then acts as in the fine run. Ties: a touch at
exactly ``c_i`` or ``e_i`` comes before that step's own event (a fault scheduled ahead
does in the fine run too). The end of the run (time limit, a stop) summarises the steps
done by then (:meth:`StretchBook.finish`).

A stretch is not used (the members loop step by step) with a tie seed (same-time order is
shuffled there), while a fault trigger is armed (it may watch the steps), or when the
members do not arrive together, differ, or one cannot run or reach the others.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from elastic_sim.protocols.api import JSON, StretchResult
from elastic_sim.sim.kernel import Call, Kernel
from elastic_sim.sim.tasks import Pending, Waiter, wake_all

if TYPE_CHECKING:
    from elastic_sim.sim.collectives import CollectiveEngine, Entry, GroupState, Member

KIND = "train_steps"

Reached = Callable[[int, list[list[float]]], None]
"""A member's mark hook: ``reached(i, sums)``, the sums of its steps since the last mark
(or the start) up to mark ``i``, which it applies before it acts."""


class Arrival(Pending[StretchResult]):
    """One member's entry into a ``train``: awaited for its :class:`StretchResult`."""

    __slots__ = ("count", "fields", "first", "grads", "marks", "member", "nvalues", "reached",
                 "sleep_s", "t")

    def __init__(self, kernel: Kernel, member: Member, count: int, sleep_s: float,
                 grads: Callable[[int], list[float]], first: int,
                 fields: Mapping[str, JSON] | None, marks: tuple[int, ...] = (),
                 reached: Reached | None = None) -> None:
        super().__init__(kernel)
        self.member = member
        self.count = count
        self.sleep_s = sleep_s
        self.grads = grads
        self.first = first
        self.fields = fields
        self.marks = marks if reached is not None else ()
        """Steps (ascending) after which ``reached`` is called."""
        self.reached = reached
        self.t = kernel.now
        self.nvalues = len(grads(0))


class _Stretch:
    def __init__(self, group: GroupState, arrivals: list[Arrival], cost: float) -> None:
        self.group = group
        self.arrivals = arrivals
        a0 = arrivals[0]
        self.start = a0.t
        self.sleep_s = a0.sleep_s
        self.cost = cost
        self.count = a0.count
        self.seq0 = a0.member.seq
        self.nbytes = 8 * a0.nvalues
        self.lo = 0
        """The first step not yet summarised (and handed over): the last mark's plus one."""
        self.marks = [i for i in reversed(a0.marks) if i < self.count - 1]
        """The marks the stretch has still to act on, last first (the last step's is the
        member's own, once the stretch ends)."""
        self.enter: list[float] = []
        self.done: list[float] = []
        t = self.start
        for _ in range(self.count):
            t = t + self.sleep_s
            self.enter.append(t)
            t = t + cost
            self.done.append(t)
        self.call: Call | None = None
        self.mark_call: Call | None = None


class StretchBook:
    """The stretches of one run: gathering the members, running, splitting, finishing."""

    def __init__(self, kernel: Kernel, engine: CollectiveEngine, wake_latency: float,
                 enabled: bool, triggers_armed: Callable[[], bool]) -> None:
        self.k = kernel
        self.wake_latency = wake_latency
        self.engine = engine
        self.enabled = enabled
        self.triggers_armed = triggers_armed
        self._gathers: dict[tuple[int, int], tuple[GroupState, dict[int, Arrival]]] = {}
        self._closed: set[tuple[int, int]] = set()
        self.active: list[_Stretch] = []

    # -- arriving ----------------------------------------------------------------------

    def arrive(self, m: Member, count: int, sleep_s: float, grads: Callable[[int], list[float]],
               first: int, fields: Mapping[str, JSON] | None, marks: tuple[int, ...] = (),
               reached: Reached | None = None) -> Arrival:
        """``m`` enters a ``train`` of ``count`` steps; await the result."""
        a = Arrival(self.k, m, count, sleep_s, grads, first, fields, marks, reached)
        g = m.group
        key = (id(g), m.seq)
        if not self.enabled or count < 1 or key in self._closed:
            a.settle(StretchResult())
            return a
        gather = self._gathers.get(key)
        if gather is None:
            gather = (g, {})
            self._gathers[key] = gather
            self.k.soon(self._decide, key)
        gather[1][m.rank] = a
        if len(gather[1]) == g.size:
            del self._gathers[key]
            self._start(g, [gather[1][r] for r in sorted(gather[1])], key)
        return a

    def _decide(self, key: tuple[int, int]) -> None:
        """The instant's callbacks are over and not every member came: all go fine."""
        gather = self._gathers.pop(key, None)
        if gather is not None:
            self._fine(gather[1].values(), key)

    def _fine(self, arrivals: Any, key: tuple[int, int]) -> None:
        self._closed.add(key)
        wake = [w for a in arrivals if (w := a.settle(StretchResult())) is not None]
        if wake:
            self.k.soon(wake_all, wake)

    def _eligible(self, g: GroupState, arrivals: list[Arrival]) -> bool:
        a0 = arrivals[0]
        if self.triggers_armed() or g.dead_at is not None:
            return False
        hosts = []
        for a in arrivals:
            m = a.member
            p = m.proc
            if (a.t != a0.t or a.count != a0.count or a.sleep_s != a0.sleep_s
                    or a.nvalues != a0.nvalues or m.seq != a0.member.seq or m.dead
                    or a.marks != a0.marks
                    or m.aborted or not p.alive or not p.runnable or p.wedged
                    or m.pending or self.engine.injected.get(p.host.name)):
                return False
            hosts.append(p.host.name)
        return self.engine.net.all_reachable(hosts)

    def _start(self, g: GroupState, arrivals: list[Arrival], key: tuple[int, int]) -> None:
        if not self._eligible(g, arrivals):
            self._fine(arrivals, key)
            return
        st = _Stretch(g, arrivals, self.engine._cost(g, "allreduce", 8 * arrivals[0].nvalues))
        st.call = self.k.call_exactly(st.done[-1], self._complete, st)
        self._next_mark(st)
        self.active.append(st)

    def _next_mark(self, st: _Stretch) -> None:
        """Schedule the stretch's next mark at its step's end (one pending at a time)."""
        st.mark_call = None
        if st.marks:
            i = st.marks.pop()
            st.mark_call = self.k.call_exactly(st.done[i], self._mark, st, i)

    def _mark(self, st: _Stretch, i: int) -> None:
        """Mark ``i``'s step ended now: summarise the steps since the last mark, hand each
        member their sums and let it act (in rank order), and run on."""
        self._record(st, i + 1, False)
        sums = self._sums(st, i + 1)
        st.lo = i + 1
        failed: dict[int, Exception] = {}
        for n, a in enumerate(st.arrivals):
            assert a.reached is not None
            try:
                a.reached(i, [list(s) for s in sums])
            except Exception as exc:  # raised in that member's train, as its task would
                failed[n] = exc
        if failed:  # the others go on step by step, as the failed one's fate touches them
            self.active.remove(st)
            self._cancel(st)
            self._end(st, i + 1, False, failed)
            return
        self._next_mark(st)

    # -- ending ------------------------------------------------------------------------

    def _complete(self, st: _Stretch) -> None:
        self.active.remove(st)
        self._end(st, st.count, None)

    def split_all(self) -> None:
        """Something may touch the members now: end every stretch as the fine run stands."""
        if not self.active:
            return
        now = self.k.now
        for st in list(self.active):
            self.active.remove(st)
            self._cancel(st)
            # steps done strictly before now, or up to a mark taken at this very instant
            k = max(bisect_left(st.done, now), st.lo)
            self._end(st, k, now > st.enter[k])

    @staticmethod
    def _cancel(st: _Stretch) -> None:
        for call in (st.call, st.mark_call):
            if call is not None:
                call.cancel()

    def finish(self) -> None:
        """The run ends now: summarise the steps each stretch has done by now."""
        now = self.k.now
        for st in self.active:
            self._cancel(st)
            k = max(bisect_left(st.done, now), st.lo)
            self._record(st, k, k < st.count and now > st.enter[k])
        self.active = []

    def _record(self, st: _Stretch, k: int, entered: bool) -> None:
        """Each member's summary of steps ``lo..k-1`` (and, ``entered``, step k's entry),
        as a stretch begun at the last mark would trace it."""
        lo = st.lo
        if k == lo and not entered:
            return
        start = st.start if lo == 0 else st.done[lo - 1]
        for a in st.arrivals:
            p = a.member.proc
            if p.alive:
                self.k.trace(p.host.name, p.name, KIND, {
                    "group": st.group.name, "seq": st.seq0 + lo, "op": "allreduce",
                    "nbytes": st.nbytes, "steps": k - lo, "open": entered,
                    "first": a.first + lo, "start": start, "sleep": st.sleep_s,
                    "cost": st.cost, "fields": None if a.fields is None else dict(a.fields)})

    def _end(self, st: _Stretch, k: int, entered: bool | None,
             failed: Mapping[int, Exception] | None = None) -> None:
        """Settle every member: ``k`` steps done; then (None) all done: wake now, as a
        collective's end does; (False) in step k's compute: wake at its end, as the
        sleep's timer would; (True) inside step k's allreduce: the backdated entry wakes
        the task when it ends, fails or times out, as the fine run's entry would.
        ``failed`` (by arrival index): members whose mark raised, woken now with it."""
        self._record(st, k, bool(entered))
        sums = self._sums(st, k)
        st.lo = k
        for a in st.arrivals:
            a.member.seq = st.seq0 + k
        wake: list[Waiter] = []
        for n, a in enumerate(st.arrivals):
            task, gen = a.task, a.gen
            if failed and n in failed:
                a.settle(None, failed[n])
                if task is not None:
                    wake.append((task, gen))
                continue
            res = StretchResult(sums=[list(s) for s in sums], slept=entered is False)
            if entered:
                e = self._enter(a, st, k)
                res.entry = e
                if task is not None:
                    e.task, e.gen = task, gen
            a.settle(res)
            if task is None:
                continue
            if entered is None:
                wake.append((task, gen))
            elif entered is False:
                self.k.call_exactly(st.enter[k], task._resume, gen)
        if wake:
            self.k.soon(wake_all, wake)

    def _sums(self, st: _Stretch, k: int) -> list[list[float]]:
        """Each step's allreduce result (in rank order, as the fine run sums), of steps
        ``lo..k-1`` (those not handed over at a mark yet)."""
        out = []
        first, rest = st.arrivals[0], st.arrivals[1:]
        for i in range(st.lo, k):
            total = [float(v) for v in first.grads(i)]
            for a in rest:  # (a float plus a number converts it as float() does)
                total = [t + x for t, x in zip(total, a.grads(i), strict=True)]
            out.append(total)
        return out

    def _enter(self, a: Arrival, st: _Stretch, k: int) -> Entry:
        """Step k's allreduce, entered by ``a``'s member at ``enter[k]`` (backdated)."""
        vals = [float(v) for v in a.grads(k)]
        return self.engine.backdated(a.member, st.seq0 + k, vals, st.enter[k], st.cost)
