"""The rendezvous-at-scale scenario (studies/rendezvous_4000_hosts.yaml) runs at a small
size: every agent gets its workers' ranks, within seconds of virtual time, the same on
every run."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_every_agent_gets_its_ranks_and_the_figure_is_deterministic() -> None:
    def run(*extra: str) -> str:
        proc = subprocess.run([sys.executable, "scripts/rendezvous_at_scale.py", "--hosts", "16",
                               "32", *(extra or ("--start-over", "0"))], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    line = (r"(\d+) hosts \(started over ([\d.]+) s\): rendezvous done ([\d.]+)-([\d.]+) s, "
            r"every agent's ranks at ([\d.]+) s \(virtual; ([\d.]+) s after")
    out = run()
    got = re.findall(line, out)
    assert [g[0] for g in got] == ["16", "32"], out
    for _, over, first, last, ranks, after in got:
        assert float(over) == 0 and float(after) == float(ranks)
        assert 0 < float(first) <= float(last) <= float(ranks) < 10.0
    strip = re.sub(r"; [\d.]+ CPU s", "", out)
    assert re.sub(r"; [\d.]+ CPU s", "", run()) == strip
    # hosts coming up over 8 s: the last host's start (i x 8 / N) bounds the round from below
    for n, over, first, _, ranks, after in re.findall(line, run("--start-over", "8")):
        assert abs(float(over) - 8 * (int(n) - 1) / int(n)) <= 0.05  # printed to 0.1 s
        assert float(over) < float(first)
        assert abs(float(ranks) - float(over) - float(after)) <= 0.06


def test_a_size_that_forms_no_round_says_how_far_it_got() -> None:
    """Cut before the last host started, no round: the script exits 1 and reports the
    store host's readings of the round's participants (the first at 1 s, the last at the
    cut), not a figure."""
    proc = subprocess.run([sys.executable, "scripts/rendezvous_at_scale.py", "--hosts", "32",
                           "--start-over", "10", "--time-limit", "5.5"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    got = re.search(r"32 hosts \(started over 9.7 s\): NO round: 0 agents finished the "
                    r"rendezvous and 0 got their ranks by 5.5 s \(virtual\), when the run "
                    r"ended \(its time limit\); the round's participants peaked at (\d+) "
                    r"\((\d+) s\) and were (\d+) at (\d+) s", proc.stdout)
    assert got, proc.stdout
    peak, at, last, last_at = map(int, got.groups())
    # hosts i < 32 x 5 / 10 have started by 5 s: about 16 joined, none more than started
    assert 12 <= last <= peak <= 18 and last_at == 5 and at <= 5
