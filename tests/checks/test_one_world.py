"""one_world_at_a_time: two worlds without a common member never train at the same time
(a split brain), while a world that hands over to the next, or shares a member with it,
is one job going on."""

from __future__ import annotations

from elastic_sim.checks import one_world_at_a_time
from elastic_sim.trace import TraceEvent
from tests.checks.test_checks import ev, formed


def test_two_worlds_without_a_common_member_training_at_once_are_caught() -> None:
    """A world (a, b) trains from 2 s to 6 s; a world (c, d) formed meanwhile trains from
    3 s: a split brain. A world that shares a member with the one before, or that trains
    only once the first stopped, is one job going on."""
    def steps(hosts: list[str], rnd: int, times: list[float]) -> list[TraceEvent]:
        return [ev(t, h, "step", round=rnd, step=i) for i, t in enumerate(times) for h in hosts]

    def history(second: list[str], start: float) -> list[TraceEvent]:
        h = [*formed(0, ["a", "b"]), *steps(["a", "b"], 0, [2.0, 4.0, 6.0]),
             *formed(1, second, t=start - 0.5), *steps(second, 1, [start, start + 2.0])]
        return sorted(h, key=lambda e: e.t)

    res = one_world_at_a_time(history(["c", "d"], 3.0))
    assert not res.ok and res.checked == 2
    (v,) = res.violations
    assert v.message.startswith("round 0 (a, b) and round 1 (c, d) trained at the same time "
                                "with no member in common: round 0 stepped from 2 s to 6 s, "
                                "round 1 from 3 s")
    assert [(e.kind, e.get("round")) for e in v.witness] == [
        ("rdzv_done", 0), ("rdzv_done", 1), ("step", 1), ("step", 0)]
    # c and d take over from a and b once they stopped: one job
    assert one_world_at_a_time(history(["c", "d"], 6.5)).ok
    # b moves on to the new world: a's last steps in the old one are an old world ending
    h = sorted([*formed(0, ["a", "b"]), *steps(["a"], 0, [2.0, 4.0, 6.0]),
                *formed(1, ["b", "c"], t=2.5), *steps(["b", "c"], 1, [3.0, 5.0])],
               key=lambda e: e.t)
    assert one_world_at_a_time(h).ok
