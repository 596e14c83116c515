"""Every fault type and trigger is written in a scenario, read back as the same data, and
bad fault input exits 2 with one message naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.fault_schema import SINGLE, fault_dict
from elastic_sim.faults.model import FAULT_TYPES
from elastic_sim.scenario import parse_scenario, with_faults

HEAD = """\
protocol: {name: static, knobs: {min_hosts: 2, max_hosts: 4}}
cluster: {hosts: 4}
faults:
"""
GPU_HEAD = HEAD.replace("cluster: {hosts: 4}", "cluster: {hosts: 4, device: cuda}")


def head_for(kind: str) -> str:
    """:data:`HEAD` on the device a fault type needs (a GPU fault's: cuda)."""
    return GPU_HEAD if FAULT_TYPES[kind].device == "cuda" else HEAD


EXAMPLES: dict[str, str] = {
    "crash": "{type: crash, host: h3, at: 1}",
    "crash_process": "{type: crash_process, proc: h3/main, at: 1}",
    "hang": "{type: hang, host: h3, at: 1, duration: 2}",
    "partition": "{type: partition, groups: [[h0], [h1]], at: 1, duration: 2}",
    "crash_restart": "{type: crash_restart, host: h3, at: 1, downtime: 3}",
    "straggler": "{type: straggler, host: h3, at: 1, factor: 2.5, duration: 2}",
    "preempt": "{type: preempt, host: h3, at: 1, grace: 10}",
    "isolate": "{type: isolate, host: h3, at: 1, duration: 2}",
    "isolate_store": "{type: isolate_store, at: 1, duration: 2}",
    "bridge": "{type: bridge, groups: [[h0], [h3]], bridge: [h1], at: 1, duration: 2}",
    "one_way_partition": "{type: one_way_partition, src: [h3], dst: [h0], at: 1, duration: 2}",
    "link": "{type: link, a: h0, b: '*', delay: 0.01, loss: 0.1, duplicate: 0.1, reorder: 0.01,"
            " at: 1, duration: 2}",
    "clock_skew": "{type: clock_skew, host: h3, offset: -30, at: 1, duration: 2}",
    "clock_jump": "{type: clock_jump, host: h3, delta: 3600, at: 1}",
    "store_crash": "{type: store_crash, at: 1}",
    "store_freeze": "{type: store_freeze, host: h0, at: 1, duration: 2}",
    "collective": "{type: collective, host: h2, mode: hang, at: 1}",
    "scale_up": "{type: scale_up, host: h3, at: 1}",
    "wedge": "{type: wedge, host: h3, activity: main, proc: h3/main, at: 1, duration: 2}",
    "gpu_wedge": "{type: gpu_wedge, host: h3, proc: h3/main, at: 1}",
    "slow_start": "{type: slow_start, host: h3, delay: 2.5, at: 0}",
    "conn_reset": "{type: conn_reset, a: h0, b: h2, at: 1}",
    "power_off": "{type: power_off, host: h3, at: 1}",
    "crash_loop": "{type: crash_loop, host: h3, to: any, starts: 2, at: 1}",
    "signal": "{type: signal, host: h3, signal: HUP, to: workers, at: 1}",
    "scale_down": "{type: scale_down, host: h3, at: 1, grace: 5}",
    "discovery_add": "{type: discovery_add, host: h3, slots: 2, at: 1, duration: 4}",
    "discovery_remove": "{type: discovery_remove, host: h3, at: 1}",
    "discovery_error": "{type: discovery_error, at: 1, duration: 2}",
    "discovery_hang": "{type: discovery_hang, at: 1, duration: 2}",
}


def test_every_fault_type_has_an_example() -> None:
    assert sorted(EXAMPLES) == sorted(SINGLE)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_a_fault_reads_back_as_the_same_data(kind: str) -> None:
    import yaml

    sc = parse_scenario(yaml.safe_load(head_for(kind) + f"  - {EXAMPLES[kind]}\n"))
    (fault,) = sc.fault_objects()
    assert fault.type == kind and fault.id == f"f0-{kind}"
    again = with_faults(sc, [fault], seed=0, name="again")
    assert again.fault_objects() == [fault]
    assert fault_dict(fault)["type"] == kind


def test_a_triggered_fault_reads_back_with_its_trigger() -> None:
    import yaml

    sc = parse_scenario(yaml.safe_load(
        HEAD + "  - {type: crash, host: h3, at: 0.5, when: {event: rdzv_join, host: h2, "
               "match: {round: 3}}}\n"))
    (fault,) = sc.fault_objects()
    assert with_faults(sc, [fault], seed=0, name="again").fault_objects() == [fault]


CASES = [
    ("unknown_new_type", "{type: meltdown, host: h3, at: 1}",
     ["faults[0].type", "unknown fault type 'meltdown'", "crash_restart", "scale_up"]),
    ("no_time_no_trigger", "{type: crash, host: h3}",
     ["faults[0].at", "required field is missing", "at_step"]),
    ("two_triggers", "{type: crash, host: h3, at_step: 3, at_epoch: 1}",
     ["faults[0].at_epoch", "one trigger"]),
    ("trigger_host", "{type: crash, host: h3, when: {event: step, host: h7}}",
     ["faults[0].when.host", "unknown host 'h7'"]),
    ("trigger_field", "{type: crash, host: h3, when: {evnt: step}}",
     ["faults[0].when.evnt", "unknown field", "did you mean 'event'"]),
    ("bad_loss", "{type: link, at: 1, duration: 1, loss: 1.5}",
     ["faults[0].loss", "less than or equal to 1"]),
    ("bridge_host", "{type: bridge, groups: [[h0], [h9]], bridge: [h1], at: 1, duration: 1}",
     ["faults[0].groups[1][0]", "unknown host 'h9'"]),
    ("one_way_overlap", "{type: one_way_partition, src: [h1], dst: [h1], at: 1, duration: 1}",
     ["faults[0].dst", "both src and dst"]),
    ("straggler_factor", "{type: straggler, host: h1, factor: 0.5, at: 1, duration: 1}",
     ["faults[0].factor", "greater than or equal to 1"]),
    ("collective_mode", "{type: collective, host: h1, mode: explode, at: 1}",
     ["faults[0].mode", "'fail' or 'hang'"]),
    ("mtbf_host", "{type: mtbf, mtbf: 10, until: 100, hosts: [h0, hx]}",
     ["faults[0].hosts[1]", "unknown host 'hx'"]),
    ("replay_missing", "{type: replay, file: nowhere.csv}",
     ["faults[0].file", "cannot read failure trace"]),
    ("link_end", "{type: link, a: h0, b: h8, at: 1, duration: 1}",
     ["faults[0].b", "unknown host 'h8'"]),
    ("discovery_add_host", "{type: discovery_add, host: h9, at: 1}",
     ["faults[0].host", "unknown host 'h9'"]),
    ("discovery_add_slots", "{type: discovery_add, host: h3, slots: 0, at: 1}",
     ["faults[0].slots", "greater than or equal to 1"]),
    ("discovery_error_duration", "{type: discovery_error, at: 1}",
     ["faults[0].duration", "required"]),
    ("infinite_time", "{type: crash, host: h3, at: .inf}",
     ["faults[0].at", "finite number"]),
    ("zero_duration", "{type: hang, host: h3, at: 1, duration: 0}",
     ["faults[0].duration", "greater than 0"]),
    ("nan_offset", "{type: clock_skew, host: h3, at: 1, duration: 1, offset: .nan}",
     ["faults[0].offset", "finite number"]),
    ("negative_downtime", "{type: crash_restart, host: h3, at: 1, downtime: -1}",
     ["faults[0].downtime", "greater than or equal to 0"]),
    ("infinite_delay", "{type: link, at: 1, duration: 1, delay: .inf}",
     ["faults[0].delay", "finite number"]),
    ("empty_partition_side", "{type: partition, groups: [[h0], []], at: 1, duration: 1}",
     ["faults[0].groups[1]", "at least 1"]),
    ("discovery_hang_field", "{type: discovery_hang, host: h1, at: 1, duration: 1}",
     ["faults[0].host", "unknown field"]),
    ("gpu_wedge_on_cpus", "{type: gpu_wedge, host: h1, at: 1}",
     ["faults[0].type", "a gpu_wedge fault needs cluster.device: cuda, got cpu"]),
]


@pytest.mark.parametrize("name,entry,needles", CASES, ids=[c[0] for c in CASES])
def test_bad_fault_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, entry: str,
    needles: list[str],
) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEAD + f"  - {entry}\n")
    rc = main(["validate", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert str(path) in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_a_bad_row_of_a_replayed_trace_names_that_file_and_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.csv").write_text("time,host\n1.0,h1\nlater,h2\n")
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "  - {type: replay, file: f.csv}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "f.csv: line 3.time" in err and "'later'" in err
