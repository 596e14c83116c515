"""A host waits to be taken into a Horovod job only once its discovery offers it: before
the first discovery (horovodrun's host started late) ``eventual_incorporation`` does not
count the wait for the driver as a host left out. Before, it took "no discovery yet" for
"every host offered", and reported "127.0.0.1 was available from 0 s on, but 38.22 s later
the world is 0 hosts" on a run that did nothing wrong (triage of the Horovod campaigns:
five findings). The capacity behind job failures still counts every host until a
discovery says otherwise: a job that fails on its first discovery call with every host
up fails avoidably (finding 16)."""

from __future__ import annotations

from elastic_sim.checks import run_checks
from elastic_sim.checks.capacity import replay
from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario
from tests.protocols.horovod.util import small_job

RAW = small_job("hvd_driver_slow_start", ["localhost", "127.0.0.1", "h2"],
                ["127.0.0.1:2", "h2:2"],
                [{"id": "s", "type": "slow_start", "host": "localhost", "delay": 60, "at": 0}])


def test_no_host_waits_to_be_incorporated_before_the_first_discovery() -> None:
    events, metrics, _ = simulate(parse_scenario(RAW, "<slow driver>"), 0)
    assert metrics.outcome == "completed"
    first = next(e for e in events if e.kind == "hvd_discovery")
    assert first.t > 60.0
    offered = [cap.offered for ev, cap in replay(events) if ev.t < first.t]
    assert offered and all(o is None for o in offered)  # no discovery answered yet
    res = next(c for c in run_checks(events) if c.name == "eventual_incorporation")
    assert res.ok, res.violations
