"""Real mode's power-off: the host is cut from every other host (nftables drops, never
rejects) before its processes are SIGKILLed, so no FIN or RST reaches a peer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from elastic_sim.faults.model import PowerOff
from elastic_sim.real.faults import netns
from tests.faults.util import first_full


def test_a_power_off_drops_every_connection_to_and_from_its_host() -> None:
    drops = netns.drops(PowerOff("p", 1.0, "h1"), ["h0", "h1", "h2"])
    assert drops == [netns.Drop(1, "127.0.1.2"), netns.Drop(2, "127.0.1.1"),
                     netns.Drop(2, "127.0.1.3"), netns.Drop(3, "127.0.1.2")]
    assert netns.needs_cut([PowerOff("p", 1.0, "h1")])


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
@pytest.mark.skipif(bool(netns.missing()), reason=f"no network cut: {netns.missing()}")
def test_peers_of_a_really_powered_off_host_see_only_their_timeout(tmp_path: Path) -> None:
    from tests.faults.test_real_faults import run_real

    rc, s, ev = run_real(tmp_path, [{"id": "off", "type": "power_off", "host": "h3",
                                     "at": 3.0}])
    assert s["faults"][0]["fired"] and s["exit_codes"]["h3/main"] == -9
    off = next(e["t"] for e in ev if e["kind"] == "fault")
    steps = [e["t"] for e in ev if e["kind"] == "step" and e["host"] == "h0"]
    # group_timeout 30 s in BASE: no survivor notices before its allreduce times out, so
    # no step is taken in between (after a crash the world re-forms within seconds)
    assert not [t for t in steps if off + 1 < t < off + 25]
    assert rc == 0 and first_full(s["metrics"]["world_sizes"]) == [4, 3]
