"""The rules every scenario value follows, whatever its field: a host's name is a DNS name,
a number is written as a number, and an error line quotes at most 200 characters of the
input. Each refusal is exit 2 with one line naming the field, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main

BASE = """\
protocol: {name: static, knobs: {min_hosts: 1, max_hosts: 3}}
cluster: {hosts: [h0, h1, HOST]}
workload: {steps: 10, step_time: 0.1, commit_every: 5}
faults:
  - {type: crash, host: h1, at: 0.5}
"""


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    """Validate and run ``text``: both exit 2 with one line; nothing written. The line."""
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert not out.exists()
    return lines[0]


# -- host names (issue 34, item 7) -------------------------------------------------------

@pytest.mark.parametrize("name", ['""', '"a/b"', '"*"', '"h\\0x"', '"<b>h</b>"', '"-h"',
                                  '"h_1"', '"a..b"', '"' + "x" * 64 + '"', '"h 1"'])
def test_a_host_name_that_is_not_a_dns_name_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    line = refused(tmp_path, capsys, BASE.replace("HOST", name))
    assert "cluster.hosts[2]" in line and "expected a host name" in line


def test_a_host_object_name_follows_the_same_rule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(tmp_path, capsys, BASE.replace("HOST", '{name: "a/b", start_at: 1}'))
    assert "cluster.hosts[2].name" in line and "expected a host name" in line


@pytest.mark.parametrize("name", ["h2", "node-3", "H2", "127.0.0.1", "a.b-c.d", "x" * 63])
def test_dns_names_are_host_names(tmp_path: Path, name: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("HOST", name))
    assert main(["validate", str(path)]) == 0


# -- numbers (issue 34, item 10) ---------------------------------------------------------

GOOD = BASE.replace("HOST", "h2")


@pytest.mark.parametrize("old,new,where", [
    ("steps: 10", "steps: '10'", "workload.steps"),
    ("steps: 10", "steps: 1_000", "workload.steps"),
    ("steps: 10", "steps: true", "workload.steps"),
    ("steps: 10", "steps: 10.0", "workload.steps"),
    ("at: 0.5", "at: '1e3'", "faults[0].at"),
    ("at: 0.5", "at: true", "faults[0].at"),
    ("at: 0.5", "at: 0x10", "faults[0].at"),
    ("at: 0.5", "at: '0.5'", "faults[0].at"),
    ("step_time: 0.1", "step_time: 1:30", "workload.step_time"),
    ("{hosts: [h0, h1, h2]}", "{hosts: [h0, h1, h2], latency: '1e-3'}", "cluster.latency"),
    ("max_hosts: 3", "max_hosts: '3'", "protocol.knobs.max_hosts"),
    ("max_hosts: 3", "max_hosts: -0.0", "protocol.knobs.max_hosts"),
    ("max_hosts: 3", "max_hosts: true", "protocol.knobs.max_hosts"),
    ("max_hosts: 3}", "max_hosts: 3, last_call: '1'}", "protocol.knobs.last_call"),
])
def test_a_number_written_as_anything_else_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str,
        where: str) -> None:
    assert old in GOOD
    line = refused(tmp_path, capsys, GOOD.replace(old, new))
    assert f"{where}:" in line, line
    assert any(why in line for why in ("expected a number", "valid", "greater than")), line


def test_horovods_min_start_hosts_refuses_a_huge_float(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("protocol: {name: horovod, knobs: {min_start_hosts: -1.0e18}}\n"
            "cluster: {hosts: [h0, h1]}\n")
    line = refused(tmp_path, capsys, text)
    assert "protocol.knobs.min_start_hosts" in line


@pytest.mark.parametrize("old,new", [
    ("at: 0.5", "at: 1"),           # an integer where a float is expected stays valid
    ("at: 0.5", "at: 1e3"),         # YAML 1.2's exponent without a dot is a number
    ("at: 0.5", "at: 1.0e-1"),
    ("at: 0.5", "at: -0.0"),        # a float that is zero, where a float is expected
    ("max_hosts: 3}", "max_hosts: 3, last_call: 2}"),
])
def test_numbers_written_as_numbers_stay_valid(tmp_path: Path, old: str, new: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace(old, new))
    assert main(["validate", str(path)]) == 0


# -- how much of the input an error line quotes (issue 34, item 11) ----------------------

HUGE = "A" * 1_000_000


@pytest.mark.parametrize("old,new", [
    ("HOST", f'"{HUGE}"'),                                  # a host name
    ("host: h1", f'host: "{HUGE}"'),                        # an unknown host
    ("steps: 10", f'steps: "{HUGE}"'),                      # a number field
    ("steps: 10", f'? {HUGE} : 10'),                        # an unknown key
    ("type: crash", f'type: "{HUGE}"'),                     # an unknown fault type
    ("max_hosts: 3", f'max_hosts: "{HUGE}"'),               # a knob
    ("max_hosts: 3", f'? {HUGE} : 3'),                      # an unknown knob
    ("name: static", f'name: "{HUGE}"'),                    # an unknown protocol
    ("commit_every: 5}", 'commit_every: 5}\nexpect: {violated_checks: ["' + HUGE + '"]}'),
])
def test_an_error_line_quotes_at_most_200_characters_of_the_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str) -> None:
    line = refused(tmp_path, capsys, BASE.replace("HOST", "h2").replace(old, new)
                   if old != "HOST" else BASE.replace(old, new))
    assert "A" * 150 in line and "A" * 201 not in line, len(line)
    assert len(line) < 2500


# -- hosts that come up over a while (cluster.start_over) --------------------------------

def test_hosts_given_as_a_count_start_evenly_over_start_over() -> None:
    from elastic_sim.scenario import parse_scenario

    def starts(cluster: dict[str, float]) -> list[float]:
        raw = {"protocol": {"name": "static", "knobs": {"min_hosts": 1, "max_hosts": 4}},
               "cluster": cluster, "workload": {"steps": 5}}
        return [h.start_at for h in parse_scenario(raw, "<s>").cluster.host_specs()]

    assert starts({"hosts": 4, "start_over": 10}) == [0.0, 2.5, 5.0, 7.5]
    assert starts({"hosts": 4}) == [0.0] * 4


def test_start_over_with_listed_hosts_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(tmp_path, capsys, BASE.replace("HOST", "h2").replace(
        "cluster: {", "cluster: {start_over: 5, "))
    assert "cluster.start_over" in line and "start_at" in line


def test_a_negative_start_over_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("HOST", "h2").replace("hosts: [h0, h1, h2]", "hosts: 3, start_over: -1")
    assert "cluster.start_over" in refused(tmp_path, capsys, text)
