"""The worker group's state machine: the agent changes state only through
:func:`~elastic_sim.protocols.torchelastic.agent.transition`, which allows exactly
:data:`~elastic_sim.protocols.torchelastic.agent.TRANSITIONS`; and that table is what torch's
own ``SimpleElasticAgent._invoke_run`` (torch 2.13) does, driven through every path of its
control loop with scripted monitor passes."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from elastic_sim.protocols.torchelastic.agent import (
    TRANSITIONS,
    IllegalTransition,
    WorkerState,
    transition,
)

S = WorkerState


def allowed() -> set[tuple[WorkerState, WorkerState]]:
    return {(a, b) for a, nexts in TRANSITIONS.items() for b in nexts}


@pytest.mark.parametrize(("current", "new"), list(itertools.product(S, S)),
                         ids=lambda s: s.value)
def test_a_transition_is_made_exactly_when_the_table_allows_it(current: WorkerState,
                                                               new: WorkerState) -> None:
    if (current, new) in allowed():
        assert transition(current, new) is new
    else:
        with pytest.raises(IllegalTransition, match=f"from {current.value} to {new.value}"):
            transition(current, new)


def test_the_table_names_every_state_and_success_and_unknown_are_final() -> None:
    assert set(TRANSITIONS) == set(S)
    assert TRANSITIONS[S.SUCCEEDED] == TRANSITIONS[S.UNKNOWN] == frozenset()


def upstream_transitions(monitored: list[str], max_restarts: int,
                         waiting: list[int]) -> list[tuple[WorkerState, WorkerState]]:
    """The (from, to) state changes torch's agent makes when its monitor passes read
    ``monitored`` (state names) and its rendezvous reports ``waiting`` nodes in turn."""
    torch_api = pytest.importorskip("torch.distributed.elastic.agent.server.api",
                                    reason="the differential test needs torch 2.13")
    changes: list[tuple[WorkerState, WorkerState]] = []

    class WatchedGroup(torch_api.WorkerGroup):  # type: ignore[misc, name-defined]
        __slots__ = ()

        @property
        def state(self) -> Any:
            return torch_api.WorkerGroup.state.__get__(self)

        @state.setter
        def state(self, new: Any) -> None:
            try:
                old = torch_api.WorkerGroup.state.__get__(self)
                changes.append((S(old.value), S(new.value)))
            except AttributeError:  # the first: INIT
                pass
            torch_api.WorkerGroup.state.__set__(self, new)

    results = iter(monitored)
    nodes_waiting = iter(waiting)

    class ScriptedAgent(torch_api.SimpleElasticAgent):  # type: ignore[misc, name-defined]
        def _rendezvous(self, worker_group: Any) -> None:
            pass

        def _start_workers(self, worker_group: Any) -> dict[int, Any]:
            return {}

        def _stop_workers(self, worker_group: Any) -> None:
            pass

        def _monitor_workers(self, worker_group: Any) -> Any:
            return torch_api.RunResult(state=torch_api.WorkerState[next(results)])

        def _shutdown(self, death_sig: Any = None, timeout: int = 30) -> None:
            pass

        def _exit_barrier(self) -> None:
            pass

    handler = SimpleNamespace(num_nodes_waiting=lambda: next(nodes_waiting, 0))
    spec = torch_api.WorkerSpec(role="default", local_world_size=1, rdzv_handler=handler,
                                entrypoint="worker", max_restarts=max_restarts,
                                monitor_interval=1e-6)
    agent = ScriptedAgent(spec)
    agent._worker_group = WatchedGroup(spec)
    try:
        agent._invoke_run()
    except Exception as exc:
        assert "Worker group in UNKNOWN state" in str(exc)
    return changes


def every_upstream_path() -> Iterator[list[tuple[WorkerState, WorkerState]]]:
    yield upstream_transitions(["HEALTHY", "SUCCEEDED"], 0, [])  # runs, succeeds
    yield upstream_transitions(["FAILED", "SUCCEEDED"], 1, [])  # counted restart
    yield upstream_transitions(["FAILED"], 0, [])  # no restart left
    yield upstream_transitions(["UNHEALTHY", "UNHEALTHY"], 1, [])  # both, unhealthy
    yield upstream_transitions(["HEALTHY", "SUCCEEDED"], 0, [1])  # membership restart
    yield upstream_transitions(["UNKNOWN"], 0, [])  # lost track: it raises


def test_the_table_is_what_torchs_agent_does() -> None:
    seen = {change for path in every_upstream_path() for change in path}
    assert seen == allowed()
