"""The scenario file: loading, parsing and the cross-field checks, with errors that name the
file and the field.

A scenario names the protocol and its knobs, the cluster, the workload, the faults and
what the user expects. Everything is checked before anything runs or is written. The
schema (the pydantic models) is :mod:`elastic_sim.scenario_model` and the wording of a
schema error :mod:`elastic_sim.scenario_errors`; the models are re-exported here, where
every other module takes them from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pydantic

from elastic_sim.errors import ScenarioError, clip
from elastic_sim.fault_schema import ReplayModel, check_fault, expand, fault_dict
from elastic_sim.faults.model import Fault
from elastic_sim.protocols.ranges import MAX_PROCS
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.registry import find_protocol, protocol_names, suggest, validate_knobs
from elastic_sim.scenario_errors import _from_pydantic
from elastic_sim.scenario_model import (
    PROCESS_START,
    ClusterModel,
    DemoModel,
    EpochLogModel,
    ExpectModel,
    HostModel,
    LinkModel,
    NonNeg,
    Pos,
    ProtocolModel,
    Scenario,
    Seed,
    WorkloadModel,
)
from elastic_sim.strict_numbers import coerced_number, path_text, written_as
from elastic_sim.strict_yaml import read_yaml_file
from elastic_sim.world import World, collective_model, host_name_problem

__all__ = [
    "PROCESS_START",
    "ClusterModel",
    "DemoModel",
    "EpochLogModel",
    "ExpectModel",
    "HostModel",
    "LinkModel",
    "NonNeg",
    "Pos",
    "ProtocolModel",
    "Scenario",
    "Seed",
    "WorkloadModel",
    "build_world",
    "fault_dict",
    "load_scenario",
    "parse_scenario",
    "scenario_dict",
    "with_faults",
    "workload_dict",
]
"""What this module offers (the schema's models are re-exported from
:mod:`elastic_sim.scenario_model`)."""


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate a scenario file; :class:`ScenarioError` on any problem."""
    file = str(path)
    p = Path(path)
    raw = read_yaml_file(path, "scenario")
    if raw is None:
        raise ScenarioError(
            file, "", "empty scenario; expected a mapping with keys protocol, cluster, workload"
        )
    if not isinstance(raw, dict):
        raise ScenarioError(
            file, "", f"expected a mapping at the top level, got {type(raw).__name__}"
        )
    raw.setdefault("name", p.stem)
    return parse_scenario(raw, file)


def parse_scenario(raw: dict[str, Any], file: str = "<scenario>") -> Scenario:
    """Validate an already-parsed mapping."""
    try:
        sc = Scenario.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise _from_pydantic(file, exc) from None
    loose = coerced_number(raw, sc.model_dump())
    if loose is not None:
        raise ScenarioError(file, path_text(loose[0]), f"expected a number, got "
                            f"{written_as(loose[1])} ({clip(loose[1])}); write numbers "
                            "unquoted, as digits (1000, 0.5, 1.0e3)")
    _check_references(sc, file)
    return _resolve_fault_files(sc, file)


def _resolve_fault_files(sc: Scenario, file: str) -> Scenario:
    """Replayed failure traces: paths made relative to the scenario file, read and checked
    now (errors name the trace file's row), so a run never fails on them later."""
    if not any(isinstance(f, ReplayModel) for f in sc.faults):
        return sc
    base = Path(file).parent if not file.startswith("<") else Path(".")
    faults = [f.model_copy(update={"file": str(base / f.file)})
              if isinstance(f, ReplayModel) else f for f in sc.faults]
    sc = sc.model_copy(update={"faults": faults})
    hosts = [h.name for h in sc.cluster.host_specs()]
    for i, f in enumerate(sc.faults):
        if isinstance(f, ReplayModel):
            expand(f, f.id or f"f{i}-replay", hosts, sc.store_host, None, file, f"faults[{i}]")
    return sc




def _check_references(sc: Scenario, file: str) -> None:
    """Cross-field checks: names that must refer to something that exists."""
    p = sc.protocol
    try:
        info = find_protocol(p.name, p.entry, p.knobs_class)
    except ValueError as exc:
        where, _, msg = str(exc).partition(": ")
        raise ScenarioError(file, f"protocol.{where}", msg) from None
    if info is None:
        names = protocol_names()
        raise ScenarioError(
            file,
            "protocol.name",
            f"unknown protocol {clip(p.name)}{suggest(str(p.name), names)}; expected one of: "
            f"{', '.join(names)}, or an entry 'module:function'",
        )
    try:
        knobs = validate_knobs(info, sc.protocol.knobs)
    except ValueError as exc:
        raise ScenarioError(file, "protocol.knobs." + str(exc).split(":", 1)[0],
                            str(exc).split(":", 1)[1].strip()) from None
    problem = getattr(info.knobs(**knobs), "problem", None) if info.knobs else None
    found = problem() if callable(problem) else None
    if found is not None:
        raise ScenarioError(file, f"protocol.knobs.{found[0]}", found[1])
    if sc.cluster.start_over and not isinstance(sc.cluster.hosts, int):
        raise ScenarioError(file, "cluster.start_over", "applies to hosts given as a count; "
                            "give each listed host its own start_at instead")
    hosts = [h.name for h in sc.cluster.host_specs()]
    seen: set[str] = set()
    for i, h in enumerate(hosts):
        why = host_name_problem(h)
        if why:
            given = sc.cluster.hosts
            an_object = isinstance(given, list) and isinstance(given[i], HostModel)
            raise ScenarioError(file, f"cluster.hosts[{i}]" + (".name" if an_object else ""),
                                f"{why}; got {clip(h)}")
        if h in seen:
            raise ScenarioError(file, f"cluster.hosts[{i}]", f"duplicate host name {clip(h)}")
        seen.add(h)

    def need_host(path: str, name: str) -> None:
        if name not in seen:
            shown = ", ".join(hosts[:8]) + (", ..." if len(hosts) > 8 else "")
            raise ScenarioError(file, path, f"unknown host {clip(name)}{suggest(name, hosts)}; "
                                f"expected one of: {shown}")

    if sc.cluster.store_host is not None:
        need_host("cluster.store_host", sc.cluster.store_host)
    for i, spec in enumerate(sc.cluster.hosts if isinstance(sc.cluster.hosts, list) else ()):
        if isinstance(spec, HostModel) and (spec.steps or 0) > sc.workload.steps:
            raise ScenarioError(file, f"cluster.hosts[{i}].steps",
                                f"expected at most workload.steps ({sc.workload.steps}), "
                                f"got {spec.steps}")
    for i, link in enumerate(sc.cluster.links):
        for end in ("a", "b"):
            name = getattr(link, end)
            if name != "switch":
                need_host(f"cluster.links[{i}].{end}", name)
    ids: set[str] = set()
    for i, f in enumerate(sc.faults):
        base = f"faults[{i}]"
        check_fault(f, base, file, need_host, sc.cluster.device)
        fid = f.id or f"f{i}-{f.type}"
        if fid in ids:
            raise ScenarioError(file, base + ".id", f"duplicate fault id {clip(fid)}")
        ids.add(fid)
    from elastic_sim.checks import CHECKS

    check_names = [c.__name__ for c in CHECKS]
    named: list[tuple[str, list[str]]] = [
        (f"expect.{f}", getattr(sc.expect, f) or []) for f in ("violated_checks", "may_violate")]
    named.append(("demo.breaks", sc.demo.breaks if sc.demo else []))
    for where, names in named:
        for i, name in enumerate(names):
            if name not in check_names:
                raise ScenarioError(file, f"{where}[{i}]",
                                    f"unknown check {clip(name)}{suggest(name, check_names)}; "
                                    f"expected one of: {', '.join(check_names)}")
    if info.check is not None:
        try:
            info.check(knobs, hosts)
        except ValueError as exc:
            where, _, msg = str(exc).partition(": ")
            raise ScenarioError(file, f"protocol.knobs.{where}", msg) from None
    bounds = sc.expect.final_world_size_between
    if bounds is not None and bounds[0] > bounds[1]:
        raise ScenarioError(file, "expect.final_world_size_between",
                            f"expected [low, high] with low <= high, got {list(bounds)}")
    if sc.seed_pinned is not None and not sc.seed_pinned.strip():
        raise ScenarioError(file, "seed_pinned", "expected the reason the seed is pinned")
    procs = len(hosts) * int(knobs.get("nproc_per_node", 1))
    if procs > MAX_PROCS:
        raise ScenarioError(file, "protocol.knobs.nproc_per_node",
                            f"{len(hosts)} hosts times {knobs['nproc_per_node']} processes "
                            f"is {procs}; expected at most {MAX_PROCS} processes in one world "
                            "(MAX_PROCS, what one simulation holds in memory)")
    mn, mx = knobs.get("min_hosts"), knobs.get("max_hosts")
    if isinstance(mn, int) and isinstance(mx, int) and mn > mx:
        raise ScenarioError(
            file, "protocol.knobs.min_hosts", f"must be <= max_hosts ({mx}), got {mn}"
        )
    if isinstance(mn, int) and mn > len(hosts):
        raise ScenarioError(
            file,
            "protocol.knobs.min_hosts",
            f"must be <= the number of hosts ({len(hosts)}), got {mn}",
        )


def scenario_dict(sc: Scenario) -> dict[str, Any]:
    """The scenario as plain data (for summary.json and reproducers)."""
    return sc.model_dump(mode="json", exclude_none=True)


def workload_dict(sc: Scenario) -> dict[str, Any]:
    """The workload as the protocol reads it."""
    given = {k: v for k, v in sc.workload.model_dump().items() if v is not None}
    hosts = sc.cluster.hosts
    if not isinstance(hosts, int):
        given["hosts"] = {h.name: h.work() for h in hosts if isinstance(h, HostModel) and h.work()}
    return dataclasses.asdict(Workload(**given))


def with_faults(sc: Scenario, faults: list[Fault], *, seed: int, name: str,
                description: str = "", tie_seed: int | None = None) -> Scenario:
    """``sc`` with its faults replaced by ``faults`` and no expectations (they were about
    the original schedule): a reproducer, its seed pinned. Validated again. A ``tie_seed``
    replaces the scenario's."""
    raw = scenario_dict(sc)
    raw.update(name=name, seed=seed, faults=[fault_dict(f) for f in faults], expect={},
               seed_pinned="a reproducer: this fault schedule broke a check with this seed")
    if tie_seed is not None:
        raw["tie_seed"] = tie_seed
    if description:
        raw["description"] = description
    return parse_scenario(raw, f"<{name}>")


SIM_STORE_PORT = 29400
"""The port a simulated store is given for ``store_port: 0`` ("any free port"): the sim
has no ports in use, so every run takes the same one (real mode takes one free here)."""


def build_world(sc: Scenario, seed: int, store_port: int | None = None) -> World:
    """The runtime's view of ``sc`` run with ``seed`` (``store_port``: the store's port
    in place of the scenario's, where a real store listens). ``store_port: 0`` (any free
    port) is settled here, before any host reads it: every host must dial the port its
    store host listens on."""
    knobs = sc.knobs()
    if store_port is None and knobs.get("store_port") == 0:
        store_port = SIM_STORE_PORT
    if store_port is not None and "store_port" in knobs:
        knobs["store_port"] = store_port
    hosts = tuple(sc.cluster.host_specs())
    return World(
        hosts=hosts,
        entry=sc.protocol_info().entry,
        args={
            "hosts": [h.name for h in hosts],
            "store_host": sc.store_host,
            "knobs": knobs,
            "workload": workload_dict(sc),
            "seed": seed,
        },
        topology=sc.cluster.topology,
        latency=sc.cluster.latency,
        bandwidth=sc.cluster.bandwidth,
        links=sc.links(),
        process_start=sc.cluster.process_start,
        wake_latency=sc.cluster.wake_latency,
        process_exit=sc.cluster.process_exit,
        time_limit=sc.run_time_limit(),
        fidelity=sc.fidelity,
        device=sc.cluster.device,
        collectives=collective_model(sc.cluster.device),
    )
