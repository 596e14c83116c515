"""A SIGKILLed agent runs no ``finally``: its workers, started by torchrun in sessions of
their own (``start_new_session=True`` in torch's ``subprocess_handler._popen``), are not
signalled and train on as orphans with their peers. The sim closes a killed process's
coroutines, which runs their ``finally`` blocks; what those would signal must not be sent.
Before, the agent's ``_shutdown`` SIGTERMed its worker at the instant of its own SIGKILL,
the peers' collectives failed and, at torchrun's ``max_restarts`` 0, the job failed."""

from __future__ import annotations

from elastic_sim.pipeline import simulate
from elastic_sim.scenario import parse_scenario

RAW = {
    "name": "agent_sigkill", "seed": 0,
    "protocol": {"name": "torchelastic", "knobs": {"min_nodes": 2, "max_nodes": 3}},
    "cluster": {"hosts": 3, "store_host": "h0"},
    "workload": {"steps": 300, "step_time": 0.1, "commit_every": 50, "state_bytes": 65536},
    "faults": [{"id": "k", "type": "crash_process", "proc": "h1/main", "at": 10.0}],
}


def test_the_orphaned_worker_trains_on_and_the_job_completes() -> None:
    events, metrics, _ = simulate(parse_scenario(RAW, "<agent_sigkill>"), 0)
    exits = {e.proc: (e.t, e.get("code")) for e in events if e.kind == "proc_exit"}
    assert exits["h1/main"] == (10.0, -9)
    # not SIGTERMed with its agent: it finishes the job with its peers
    t, code = exits["h1/w0"]
    assert code == 0 and t > 30.0
    assert t == exits["h0/w0"][0] == exits["h2/w0"][0]
    assert not [e for e in events if e.kind == "coll_fail"]
    assert metrics.outcome == "completed" and metrics.world_sizes == [3]
    # the survivors' agents wait in the exit barrier for the dead one (300 s, upstream's
    # exit_barrier_timeout) and then exit 0
    barrier = [e for e in events if e.kind == "exit_barrier_failed"]
    assert {e.proc for e in barrier} == {"h0/main", "h2/main"}
    assert all(e.t - t >= 300.0 for e in barrier)
    assert exits["h0/main"][1] == exits["h2/main"][1] == 0


def test_a_sigterm_to_the_agent_still_stops_its_worker() -> None:
    """The contrast: SIGTERM runs the agent's handler and its ``finally``, which stops the
    worker (torchrun's ``_shutdown``)."""
    raw = {**RAW, "faults": [{"id": "t", "type": "signal", "host": "h1", "to": "agent",
                              "signal": "TERM", "at": 10.0}]}
    events, _, _ = simulate(parse_scenario(raw, "<agent_sigterm>"), 0)
    exits = {e.proc: (e.t, e.get("code")) for e in events if e.kind == "proc_exit"}
    assert exits["h1/w0"][0] < 11.0 and exits["h1/w0"][1] != 0
