"""``conn_reset``: established connections between two hosts are reset (RST) while new
ones can be opened, unlike a partition, which drops. Gloo's pair sees ECONNRESET on both
ends (the group fails there at once; its other members see them leave); c10d's store
client does not reconnect, so an agent whose store connection is reset fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastic_sim.trace import TraceEvent
from elastic_sim.world import PROCESS_EXIT
from tests.faults.util import simulate_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "torchelastic" / "scale_down.yaml"
AT = 9.05


def _run(fault: dict[str, Any]) -> tuple[list[TraceEvent], str]:
    events, outcome, (rep,) = simulate_with(SCENARIO, [fault])  # 3 hosts, store on h0
    assert rep.fired, rep
    return events, outcome


def _exit(events: list[TraceEvent], proc: str) -> TraceEvent:
    return next(e for e in events if e.kind == "proc_exit" and e.proc == proc)


def test_a_reset_between_two_workers_fails_their_group_and_new_groups_form() -> None:
    events, outcome = _run({"type": "conn_reset", "a": "h1", "b": "h2", "at": AT})
    for proc in ("h1/w0", "h2/w0"):
        first = _exit(events, proc)
        # fails at once, then exits after the interpreter's teardown
        assert first.t - AT < 0.1 + PROCESS_EXIT
        assert "connection reset by peer" in first.get("reason")
    assert "a peer died" in _exit(events, "h0/w0").get("reason")  # the bystander
    # new connections open: every host rejoins, the same world of 3 trains to the end
    assert [e.get("world_size") for e in events
            if e.kind == "rdzv_done" and e.proc == "h0/main"] == [3, 3]
    assert outcome == "completed"


def test_a_reset_of_an_agents_store_connection_ends_that_agent() -> None:
    events, outcome = _run({"type": "conn_reset", "a": "h0", "b": "h2", "at": AT})
    (failed,) = [e for e in events if e.kind == "job_failed" and e.proc == "h2/main"]
    assert "connection reset by peer" in failed.get("error")
    assert not [e for e in events if e.kind == "job_failed" and e.proc != "h2/main"]
    assert outcome == "completed"  # h0 and h1 go on as a world of 2


def test_unlike_a_partition_a_reset_drops_nothing_afterwards() -> None:
    events, _ = _run({"type": "conn_reset", "a": "h1", "b": "h2", "at": AT})
    cut, _ = _run({"type": "partition", "groups": [["h1"], ["h2"]], "at": AT,
                   "duration": 40})
    assert _exit(events, "h1/w0").t - AT < 0.1 + PROCESS_EXIT
    assert "timed out" in _exit(cut, "h1/w0").get("reason")  # a cut is seen only at pg_timeout
