"""Bad Horovod knobs exit 2 with one message naming the file and the knob's field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.cli import main

BASE = """\
protocol:
  name: horovod
  knobs:
{knobs}
cluster:
  hosts: [localhost, 127.0.0.1]
"""


@pytest.mark.parametrize(("knobs", "path", "words"), [
    ("    discovery: {schedule: [{hosts: ['nohost:2']}]}",
     "protocol.knobs.discovery.schedule[0].hosts[0]", "host 'nohost' is not a cluster host"),
    ("    discovery: {schedule: [{epok: 0, hosts: [localhost]}]}",
     "protocol.knobs.discovery.schedule[0].epok", "Unexpected keyword argument"),
    ("    discovery: {schedule: [{epoch: 0, until_s: 2, hosts: [localhost]}]}",
     "protocol.knobs.discovery.schedule[0]", "at most one of epoch, until_s, until_poll"),
    ("    exit_schedule: [{epoch: 1, batch: 0, ranks: [0], mode: explode}]",
     "protocol.knobs.exit_schedule[0].mode", "Input should be"),
    ("    driver_host: elsewhere", "protocol.knobs.driver_host", "not a cluster host"),
    ("    np: 4\n    max_np: 2", "protocol.knobs.min_np", "must be <= max_np (2), got 4"),
    ("    cooldown_range: [0.5, 2]", "protocol.knobs.cooldown_range", "1 <= lower"),
])
def test_bad_knobs_exit_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], knobs: str, path: str, words: str
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(BASE.format(knobs=knobs))
    assert main(["run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: {f}: {path}: ") and words in err[0]
    assert not (tmp_path / "out").exists()
