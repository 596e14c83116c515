"""The scenario file: schema, loading, and errors that name the file and the field.

A scenario names the protocol and its knobs, the cluster, the workload, the faults and
what the user expects. Everything is checked before anything runs or is written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from elastic_sim.errors import ScenarioError
from elastic_sim.fault_schema import (
    FAULT_MODELS,
    FAULT_TAGS,
    FaultModel,
    ReplayModel,
    check_fault,
    expand,
)
from elastic_sim.fault_schema import fault_dict as fault_dict
from elastic_sim.faults.model import Fault
from elastic_sim.protocols.ranges import (
    MAX_HOSTS,
    MAX_PROCS,
    Finite,
    HostCount,
    Positive,
    Seconds,
    StateBytes,
    limit_note,
)
from elastic_sim.protocols.static.settings import Workload
from elastic_sim.registry import (
    ProtocolInfo,
    find_protocol,
    protocol_names,
    suggest,
    validate_knobs,
)
from elastic_sim.strict_yaml import load_yaml
from elastic_sim.world import PROCESS_EXIT, WAKE_LATENCY, HostSpec, LinkSpec

NonNeg = Seconds
PROCESS_START = 1.3
"""Interpreter start plus ``import torch`` of a worker process (shared/calibration.md:
about 1.3 s of torchrun's 1.7 s worker-crash recovery on these machines)."""
Pos = Positive
Seed = Annotated[int, Field(ge=0, le=2**64 - 1)]
"""Seeds are 64-bit."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class HostModel(_Strict):
    """A host: its name, when it starts, its clock, and how it differs from the others."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    start_at: NonNeg = 0.0
    clock_offset: Finite = 0.0
    clock_drift: Annotated[float, Field(gt=-1, allow_inf_nan=False)] = 0.0
    """Relative rate error; above -1, where the host's clock would stop."""
    start_delay: NonNeg = 0.0
    """Extra seconds every process started on it takes before its entry runs, its first
    one included (a ``slow_start`` fault delays only the processes started after it)."""
    steps: Annotated[int, Field(ge=1)] | None = None
    """Its workers train only up to this step (at most ``workload.steps``), then end with
    success: a host that finishes early."""
    step_factor: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)] = 1.0
    """Its compute per step takes this many times ``workload.step_time`` (a slower
    machine; in synchronous training every step waits for it)."""

    def work(self) -> dict[str, float]:
        """Its differences from the workload, as the protocols read them."""
        out: dict[str, float] = {}
        if self.steps is not None:
            out["steps"] = self.steps
        if self.step_factor != 1.0:
            out["step_factor"] = self.step_factor
        return out


class LinkModel(_Strict):
    """A link whose latency/bandwidth differ from the cluster default."""

    a: str
    b: str
    latency: NonNeg
    bandwidth: Pos


class ClusterModel(_Strict):
    """Hosts (a count, names, or objects), store host and network."""

    hosts: HostCount | Annotated[list[str | HostModel], Field(min_length=1, max_length=MAX_HOSTS)]
    store_host: str | None = None
    topology: Literal["star", "full"] = "star"
    latency: NonNeg = 0.00005
    bandwidth: Pos = 3.0e9
    links: list[LinkModel] = []
    process_start: NonNeg = PROCESS_START
    """Sim only: seconds before a process started at run time (a worker) runs its entry."""
    wake_latency: NonNeg = WAKE_LATENCY
    """Sim only: seconds a sleep lasts beyond its due time (real sleeps wake late)."""
    process_exit: NonNeg = PROCESS_EXIT
    """Sim only: seconds a process takes to exit after its main returns (interpreter
    teardown; what it hosts, a store, answers until then). Real processes pay their own."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where training tensors live: ``cpu`` (Gloo groups) or ``cuda`` (NCCL groups, one
    GPU per worker; the sim then uses its NCCL failure model)."""

    def host_specs(self) -> list[HostSpec]:
        """Host specs in order (a count N gives h0..h{N-1})."""
        if isinstance(self.hosts, int):
            return [HostSpec(f"h{i}") for i in range(self.hosts)]
        out = []
        for h in self.hosts:
            if isinstance(h, str):
                out.append(HostSpec(h))
            else:
                out.append(HostSpec(h.name, h.start_at, h.clock_offset, h.clock_drift,
                                    h.start_delay))
        return out


class WorkloadModel(_Strict):
    """The training job."""

    steps: Annotated[int, Field(ge=1)] = Workload.steps
    step_time: NonNeg = Workload.step_time
    commit_every: Annotated[int, Field(ge=1)] = Workload.commit_every
    state_bytes: StateBytes = Workload.state_bytes
    params: Annotated[int, Field(ge=1, le=4096)] = Workload.params
    batch_size: Annotated[int, Field(ge=1)] = Workload.batch_size
    state_broadcast: Literal["group", "tree", "chain"] | None = None
    """How a state sync moves the root's state (protocols/broadcast.py; None: group)."""


class ProtocolModel(_Strict):
    """Which protocol model runs, with which knobs: a name (built-in, or registered by a
    package under the entry-point group ``elastic_sim.protocols``), or your own entry."""

    name: str | None = None
    """A built-in protocol (static, torchelastic, horovod) or a registered one; with
    ``entry``, only a label."""
    entry: str | None = None
    """``module:function``: your own protocol's host entry (``async def host_main(rt,
    args)``)."""
    knobs_class: str | None = None
    """With ``entry``: ``module:Class``, the dataclass of its knobs (checked like a built-in
    protocol's); without it the knobs are passed as given."""
    knobs: dict[str, Any] = {}

    @property
    def label(self) -> str:
        """The protocol's name, else its entry."""
        return self.name or self.entry or "?"


class EpochLogModel(_Strict):
    """The fields of one expected epoch log line that must match (any subset)."""

    epoch: int | None = None
    batch: int | None = None
    commits: int | None = None
    hostname: str | None = None
    start_rank: int | None = None
    rank: int | None = None
    size: int | None = None
    rendezvous: int | None = None


class ExpectModel(_Strict):
    """What the user expects; any unmet expectation makes the run exit 1."""

    outcome: Literal["completed", "failed"] | None = None
    final_world_size: Annotated[int, Field(ge=0)] | None = None
    final_world_size_between: tuple[Annotated[int, Field(ge=0)],
                                    Annotated[int, Field(ge=0)]] | None = None
    """``[low, high]``: the final world size lies within these bounds (both included), for
    an outcome that differs between seeds within a known range."""
    world_sizes: list[Annotated[int, Field(ge=1)]] | None = None
    """The world size of every round, in order."""
    max_recovery_s: NonNeg | None = None
    max_lost_steps: Annotated[int, Field(ge=0)] | None = None
    epoch_logs: list[EpochLogModel] | None = None
    """The training script's per-epoch log lines (``epoch_log`` events), in order: exactly
    as many as listed, each matching the fields it names (size, start_rank, rendezvous...)."""
    error_contains: str | None = None
    """Some ``job_failed`` error contains this text (the error the job ends with)."""
    max_end_s: Pos | None = None
    """Every process has exited within this many seconds of run time (a hang fails it)."""
    violated_checks: list[str] | None = None
    """Safety checks the modelled system is known to break here (upstream's own bugs): the
    run passes only if exactly these checks report violations."""
    may_violate: list[str] | None = None
    """Checks upstream breaks here only when it loses a race that depends on timing (e.g.
    the store host's agent exiting before the others leave the exit barrier): the run
    passes whether they report violations or not; any other check must still hold."""

    def known_violations(self) -> tuple[str, ...]:
        """Checks whose violations this run may show without failing: ``violated_checks``
        and ``may_violate``."""
        return (*(self.violated_checks or ()), *(self.may_violate or ()))


class Scenario(_Strict):
    """A whole scenario file."""

    name: str = ""
    description: str = ""
    seed: Seed = 0
    seed_pinned: str | None = None
    """Why the expectations are claimed for ``seed`` only (e.g. a reproducer of one timing
    window). Without it, they hold for every seed (a test sweeps 100 of them)."""
    tie_seed: Seed | None = None
    """Sim only: order events due at the same time from different sources by this seed
    (:mod:`sim.kernel`) instead of by scheduling order (the default)."""
    time_limit: Pos = 3600.0
    """Run time (virtual in the sim) after which a run that has not ended is called hung."""
    fidelity: Literal["fast", "fine"] = "fast"
    """Sim only: ``fast`` runs fault-free lockstep training stretches as one event each
    (same times, results and checks); ``fine`` simulates every step of every worker."""
    protocol: ProtocolModel
    cluster: ClusterModel
    workload: WorkloadModel = WorkloadModel()
    faults: list[FaultModel] = []
    expect: ExpectModel = ExpectModel()

    def fault_objects(self) -> list[Fault]:
        """The faults as runtime data, each with an id (``f<i>-<type>`` unless named);
        failure-rate models and replayed traces expanded, in schedule order."""
        hosts = [h.name for h in self.cluster.host_specs()]
        out: list[Fault] = []
        for i, f in enumerate(self.faults):
            fid = f.id or f"f{i}-{f.type}"
            out.extend(expand(f, fid, hosts, self.store_host, None, "<scenario>",
                              f"faults[{i}]"))
        return out

    def protocol_info(self) -> ProtocolInfo:
        """How to run the scenario's protocol (already checked to exist)."""
        p = self.protocol
        info = find_protocol(p.name, p.entry, p.knobs_class)
        assert info is not None, "checked when the scenario was parsed"
        return info

    def knobs(self) -> dict[str, Any]:
        """The protocol's knobs with defaults filled in (already validated)."""
        return validate_knobs(self.protocol_info(), self.protocol.knobs)

    def links(self) -> tuple[LinkSpec, ...]:
        """Per-link overrides."""
        return tuple(LinkSpec(x.a, x.b, x.latency, x.bandwidth) for x in self.cluster.links)

    @property
    def store_host(self) -> str:
        """The host whose first process serves the store (default: the first host)."""
        return self.cluster.store_host or self.cluster.host_specs()[0].name


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate a scenario file; :class:`ScenarioError` on any problem."""
    file = str(path)
    p = Path(path)
    if not p.exists():
        raise ScenarioError(file, "", "no such file")
    if p.is_dir():
        raise ScenarioError(file, "", "is a directory, expected a scenario YAML file")
    raw = load_yaml(p, file)
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


_UNION_TAGS = {"str", "int", "float", "bool", "constrained-int", "constrained-float", "HostModel"}
_FAULT_TAGS = set(FAULT_TAGS)


def _is_tag(part: str, prev_int: bool) -> bool:
    """Whether a pydantic loc element names a union branch rather than a field."""
    return part in _UNION_TAGS or "[" in part or (prev_int and part in _FAULT_TAGS)


def _loc_path(loc: tuple[Any, ...]) -> str:
    out = ""
    prev_int = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            prev_int = True
            continue
        if not _is_tag(str(part), prev_int):
            out += ("." if out else "") + str(part)
        prev_int = False
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The schema model that owns the field at ``loc`` (for listing valid keys)."""
    model: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        if part in _FAULT_TAGS:
            model = FAULT_MODELS[part]
            continue
        if _is_tag(str(part), False):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return None
        ann = field.annotation
        model = _first_model(ann)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _first_model(ann: Any) -> Any:
    import typing

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _from_pydantic(file: str, exc: pydantic.ValidationError) -> ScenarioError:
    errors = exc.errors()
    # With unions, the deepest location is the branch the user meant.
    # Among equally deep ones, an unknown key explains a missing one (a typo).
    err = max(errors, key=lambda e: (len(e["loc"]), e["type"] == "extra_forbidden"))
    loc = tuple(err["loc"])
    path = _loc_path(loc)
    more = ""  # one message: the first problem (union branches would inflate a count)
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        model = _model_at(loc)
        valid = sorted(model.model_fields) if model else []
        hint = suggest(key, valid)
        expected = f"; expected one of: {', '.join(valid)}" if valid else ""
        return ScenarioError(file, path, f"unknown field '{key}'{hint}{expected}{more}")
    if err["type"] == "union_tag_invalid":
        got = err.get("input", {})
        kind = got.get("type") if isinstance(got, dict) else None
        valid = list(FAULT_TAGS)
        hint = suggest(str(kind), valid)
        return ScenarioError(
            file, path + ".type", f"unknown fault type {kind!r}{hint}; expected one of: "
            + ", ".join(valid) + more
        )
    if err["type"] == "union_tag_not_found":
        return ScenarioError(file, path + ".type", f"missing fault type; expected one of: "
                             f"{', '.join(FAULT_TAGS)}{more}")
    got = err.get("input")
    shown = "" if err["type"] == "missing" else f" (got {got!r})"
    msg = "required field is missing" if err["type"] == "missing" else err["msg"]
    return ScenarioError(file, path, f"{msg}{limit_note(err.get('ctx'))}{shown}{more}")


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
            f"unknown protocol {p.name!r}{suggest(str(p.name), names)}; expected one of: "
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
    hosts = [h.name for h in sc.cluster.host_specs()]
    seen: set[str] = set()
    for i, h in enumerate(hosts):
        if h in seen:
            raise ScenarioError(file, f"cluster.hosts[{i}]", f"duplicate host name {h!r}")
        seen.add(h)

    def need_host(path: str, name: str) -> None:
        if name not in seen:
            shown = ", ".join(hosts[:8]) + (", ..." if len(hosts) > 8 else "")
            raise ScenarioError(
                file, path, f"unknown host {name!r}{suggest(name, hosts)}; expected one of: {shown}"
            )

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
        check_fault(f, base, file, need_host)
        fid = f.id or f"f{i}-{f.type}"
        if fid in ids:
            raise ScenarioError(file, base + ".id", f"duplicate fault id {fid!r}")
        ids.add(fid)
    from elastic_sim.checks import CHECKS

    check_names = [c.__name__ for c in CHECKS]
    for field_name in ("violated_checks", "may_violate"):
        for i, name in enumerate(getattr(sc.expect, field_name) or ()):
            if name not in check_names:
                raise ScenarioError(file, f"expect.{field_name}[{i}]",
                                    f"unknown check {name!r}{suggest(name, check_names)}; "
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
