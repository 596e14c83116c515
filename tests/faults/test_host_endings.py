"""Which fault types end a host for good, and which tell a host's processes to end, is said
once, by each fault class (``Fault.ends_host``, ``Fault.tells_to_leave``); the schedule
search and the checks read it from there, so they cannot disagree."""

from __future__ import annotations

from elastic_sim.checks.contracts import LOST_FOR_GOOD
from elastic_sim.checks.facts import TOLD_TO_LEAVE
from elastic_sim.faults.model import ENDS_A_HOST, FAULT_TYPES
from elastic_sim.faults.schedule import FaultSpace, random_schedule


def test_crash_power_off_preempt_and_scale_down_end_a_host_for_good() -> None:
    assert sorted(c.scenario_type for c in ENDS_A_HOST) == [
        "crash", "power_off", "preempt", "scale_down"]
    assert sorted(t for t, c in FAULT_TYPES.items() if c.ends_host) == sorted(
        c.scenario_type for c in ENDS_A_HOST)


def test_signal_preempt_and_scale_down_tell_a_hosts_processes_to_end() -> None:
    assert sorted(t for t, c in FAULT_TYPES.items() if c.tells_to_leave) == [
        "preempt", "scale_down", "signal"]


def test_the_checks_read_the_vocabulary() -> None:
    assert sorted(LOST_FOR_GOOD) == sorted(c.scenario_type for c in ENDS_A_HOST)
    assert sorted(TOLD_TO_LEAVE) == sorted(t for t, c in FAULT_TYPES.items()
                                           if c.tells_to_leave)


def test_a_search_never_ends_a_spare_host_and_ends_at_most_max_crashes() -> None:
    space = FaultSpace(hosts=("h0", "h1", "h2", "h3"), horizon=10.0, max_faults=4,
                       spare=("h0",), max_crashes=1,
                       types=tuple(c.scenario_type for c in ENDS_A_HOST))
    ended = 0
    for i in range(200):
        hosts = {f.hosts()[0] for f in random_schedule(f"ends/{i}", space)}
        assert "h0" not in hosts and len(hosts) <= 1
        ended += len(hosts)
    assert ended > 100  # the space does draw them
