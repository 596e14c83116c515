"""The rendezvous-at-scale scenario (studies/rendezvous_4000_hosts.yaml) runs at a small
size: every agent gets its workers' ranks, within seconds of virtual time, the same on
every run."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_every_agent_gets_its_ranks_and_the_figure_is_deterministic() -> None:
    def run() -> str:
        proc = subprocess.run([sys.executable, "scripts/rendezvous_at_scale.py", "--hosts", "16",
                               "32"], cwd=ROOT, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = run()
    got = re.findall(r"(\d+) hosts: rendezvous done ([\d.]+)-([\d.]+) s, every agent's ranks "
                     r"at ([\d.]+) s", out)
    assert [g[0] for g in got] == ["16", "32"], out
    for _, first, last, ranks in got:
        assert 0 < float(first) <= float(last) <= float(ranks) < 10.0
    strip = re.sub(r"; [\d.]+ CPU s", "", out)
    assert re.sub(r"; [\d.]+ CPU s", "", run()) == strip
