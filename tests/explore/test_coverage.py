"""What a run covered is read from its trace with each protocol's declaration of its
abstract state (plain data naming recorded kinds), and a campaign names what it never
reached."""

from __future__ import annotations

import importlib

import pytest

from elastic_sim.coverage import declaration, never_reached, reach, split
from elastic_sim.trace import TraceEvent
from elastic_sim.trace_kinds import BY_KIND

PROTOCOLS = ("torchelastic", "horovod", "static")


def ev(t: float, host: str, kind: str, proc: str = "", **data: object) -> TraceEvent:
    return TraceEvent(t, host, proc or f"{host}/main", kind, data)


def test_a_run_reaches_node_states_transitions_and_fired_faults() -> None:
    events = [ev(0.0, "h0", "rdzv_join", round=0),
              ev(0.1, "*", "fault", "fault-injector", id="x", type="hang", target="h0",
                 phase="start"),
              ev(0.2, "h0", "rdzv_done", round=0, rank=0),
              ev(0.3, "h0", "agent_state", state="HEALTHY"),
              ev(0.4, "*", "fault", "fault-injector", id="x", type="hang", target="h0",
                 phase="heal"),
              ev(0.5, "h0", "step", "h0/w0", step=1)]
    parts = split(reach(events, "torchelastic"))
    assert parts["states"] == {
        "rdzv=joining,round=r0", "rdzv=joining,round=r0,fault=frozen",
        "rdzv=member,round=r1,fault=frozen", "agent=HEALTHY,rdzv=member,round=r1,fault=frozen",
        "agent=HEALTHY,rdzv=member,round=r1"}
    assert "rdzv=joining,round=r0 > rdzv=joining,round=r0,fault=frozen" in parts["transitions"]
    assert parts["fired"] == {"hang@h0"}
    assert "agent=FAILED" in never_reached("torchelastic", parts["states"])
    assert "agent=HEALTHY" not in never_reached("torchelastic", parts["states"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_declaration_is_plain_data_over_recorded_kinds(protocol: str) -> None:
    mod = importlib.import_module(f"elastic_sim.protocols.{protocol}.coverage")
    assert not [n for n in vars(mod) if n.startswith("elastic_sim")]
    decl = declaration(protocol)
    for kind, (component, value) in decl.events.items():
        assert kind in BY_KIND, kind
        assert component in decl.components
        if not value.startswith("="):
            assert value in decl.components[component], (kind, value)
        else:
            assert value[1:] in [f.rstrip("?") for f, _ in BY_KIND[kind].fields]


def test_a_protocol_without_a_declaration_has_the_shared_components() -> None:
    assert declaration("no-such-protocol").components == {}
    assert split(reach([ev(0.0, "h0", "job_done", step=3)], None))["states"] == {
        "round=r0,job=done"}
