"""Reading a study file: strict YAML, the schema (:mod:`elastic_sim.study.model`), the
cross-field checks, and the study resolved into what its levels run (:class:`Study`).
Every problem is a :class:`~elastic_sim.errors.ScenarioError` naming the file, the field
and what was expected (exit 2), found before anything runs or is written.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel

from elastic_sim.errors import ScenarioError
from elastic_sim.fault_schema import read_text_bounded
from elastic_sim.registry import find_protocol, suggest, validate_knobs
from elastic_sim.scenario_errors import _first_model, _loc_path
from elastic_sim.strict_yaml import load_yaml, read_yaml_file
from elastic_sim.study.failures import (
    Cause,
    Effect,
    FailureLogError,
    JobInterval,
    NodeRenewal,
    Process,
    Replay,
    job_mttf_at,
    node_mtbf_from_count,
    parse_failure_log,
)
from elastic_sim.study.model import (
    MAX_SETTINGS,
    EffectPart,
    FailuresPart,
    GridPart,
    PublishedFile,
    ReferencePart,
    SamplingPart,
    SettingPart,
    StudyFile,
    WorkloadPart,
)

PROTOCOL_NODES: dict[str, tuple[str | None, str | None, str | None]] = {
    "torchelastic": ("min_nodes", "max_nodes", "nproc_per_node"),
    "static": ("min_hosts", "max_hosts", None),
    "torchft": (None, None, "ranks_per_replica"),
}
"""The protocols a study can run, and the knobs that carry its node counts (least, most;
None: the protocol has none, torchft's job is as many replica groups as it has nodes and
trains on with fewer) and its workers per node (None: one worker per host)."""
DIRECT_ONLY = ("torchft",)
"""Protocols the composed level cannot compose (it composes restart-all recoveries: the
whole job stops and starts again); their studies simulate the horizon directly."""
MAX_LOG_BYTES = 16 << 20


@dataclass(frozen=True)
class Job:
    """One setting of the job: everything a level needs to run it."""

    label: str
    protocol: str
    knobs: dict[str, Any]
    """The protocol's knobs as a scenario gives them (node counts and workers included)."""
    nodes: int
    gpus_per_node: int
    spares: int
    device: str
    workload: WorkloadPart
    changes: dict[str, Any] = field(default_factory=dict)
    """What this setting changes from the study's own (the compared values)."""

    @property
    def pool(self) -> int:
        """Hosts of the pool: the job's nodes and its spares."""
        return self.nodes + self.spares

    @property
    def commit_steps(self) -> int:
        """Steps between checkpoints."""
        return max(1, round(self.workload.checkpoint_interval / self.workload.step_time))

    @property
    def restart_cost(self) -> float:
        """Seconds from a worker's start to its first step, besides what the simulator
        models: framework start-up and the checkpoint read."""
        return self.workload.restart_overhead + self.workload.checkpoint_load


@dataclass(frozen=True)
class Study:
    """A study, checked and resolved."""

    name: str
    file: str
    spec: StudyFile
    jobs: list[Job]
    causes: tuple[Cause, ...]
    process: Process
    varied: dict[str, list[Any]]
    """The settings' compared values, by what varies (empty: one setting)."""
    source: str = ""
    """Where the failure process comes from (a published file's source line)."""

    @property
    def horizon(self) -> float:
        """Seconds of the run."""
        return self.spec.horizon_days * 86_400.0

    @property
    def sampling(self) -> SamplingPart:
        """How recoveries are sampled."""
        return self.spec.sampling

    @property
    def reference(self) -> ReferencePart | None:
        """The published outcome the study is held against."""
        return self.spec.reference

    def cause(self, name: str) -> Cause:
        """The cause named ``name``."""
        return next(c for c in self.causes if c.name == name)


def load_study(path: str | Path) -> Study:
    """Read, validate and resolve a study file; :class:`ScenarioError` on any problem."""
    file = str(path)
    p = Path(path)
    raw = read_yaml_file(path, "study")
    if not isinstance(raw, dict):
        raise ScenarioError(file, "", "expected a mapping with keys cluster, workload, "
                            "failures, horizon_days")
    raw.setdefault("name", p.stem)
    spec = _validate(StudyFile, raw, file)
    return resolve(spec, file, p.parent)


def _validate(model: type[BaseModel], raw: Any, file: str) -> Any:
    try:
        return model.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise _error(model, file, exc) from None


def _error(root: type[BaseModel], file: str, exc: pydantic.ValidationError) -> ScenarioError:
    """A schema error as one message: the deepest problem, its field path as written."""
    err = max(exc.errors(), key=lambda e: (len(e["loc"]), e["type"] == "extra_forbidden"))
    loc = tuple(err["loc"])
    path = _loc_path(loc)
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        model = _owner(root, loc)
        valid = sorted(model.model_fields) if model else []
        shown = f"; expected one of: {', '.join(valid)}" if valid else ""
        return ScenarioError(file, path, f"unknown field '{key}'{suggest(key, valid)}{shown}")
    got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
    msg = "required field is missing" if err["type"] == "missing" else err["msg"]
    return ScenarioError(file, path, msg + got)


def _owner(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field list an unknown key at ``loc`` belongs to."""
    model: Any = root
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            continue  # a union branch's tag
        model = _first_model(fields[part].annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def resolve(spec: StudyFile, file: str, base: Path) -> Study:
    """The study's jobs, causes and failure process, each checked."""
    process, causes, source = _failures(spec.failures, spec, file, base)
    settings, varied = _settings(spec.compare, file)
    jobs = [_job(spec, s, file, where) for s, where in settings]
    labels = [j.label for j in jobs]
    for label in (spec.reference.completion_minutes_of if spec.reference else {}):
        if label not in labels:
            raise ScenarioError(file, f"reference.completion_minutes_of.{label}",
                                f"expected the label of a compared setting "
                                f"({', '.join(labels)}){suggest(label, labels)}")
    direct_only = [j.protocol for j in jobs if j.protocol in DIRECT_ONLY]
    if direct_only and spec.method == "composed":
        raise ScenarioError(file, "method", f"direct or auto: protocol {direct_only[0]} "
                            "has no composed level (it trains on through a failure, which "
                            "the composition of restart-all recoveries cannot show)")
    s = spec.sampling
    if s.sizes is not None and sorted(set(s.sizes)) != list(s.sizes):
        raise ScenarioError(file, "sampling.sizes", f"expected increasing sizes, got "
                            f"{list(s.sizes)}")
    return Study(spec.name, file, spec, jobs, causes, process, varied, source)


# -- failures ---------------------------------------------------------------------------

def _failures(f: FailuresPart, spec: StudyFile, file: str,
              base: Path) -> tuple[Process, tuple[Cause, ...], str]:
    rates = [k for k in ("published", "mtbf_per_node", "mtbf_per_gpu", "mttf_at_scale",
                         "every", "replay") if getattr(f, k) is not None]
    if len(rates) != 1:
        raise ScenarioError(file, "failures", "expected exactly one of published, "
                            "mtbf_per_node, mtbf_per_gpu, mttf_at_scale, every, replay; got "
                            + (", ".join(rates) or "none"))
    data = _published(base / f.published, file, "failures.published") if f.published else None
    if data is not None and data.causes:
        if f.causes is not None:
            raise ScenarioError(file, "failures.causes", f"{f.published} brings its causes; "
                                "give their effects in failures.effects")
        causes = tuple(Cause(c.name, c.count, _effect_of(f.effects, c.name, c.category, file),
                             c.category) for c in data.causes)
    elif f.causes:
        causes = tuple(Cause(c.name, c.share, Effect(c.effect, c.downtime, c.returns))
                       for c in f.causes)
        names = [c.name for c in causes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ScenarioError(file, f"failures.causes[{names.index(dup)}].name",
                                f"duplicate cause {dup!r}")
    else:
        raise ScenarioError(file, "failures.causes", "required field is missing (the causes "
                            "of failures: name, share, effect, downtime)")
    for key in f.effects:
        if key != "default" and not any(key in (c.name, c.category) for c in causes):
            raise ScenarioError(file, f"failures.effects.{key}", f"names no cause or category"
                                f"{suggest(key, [c.name for c in causes])}")
    c, gpus = spec.cluster, spec.cluster.nodes * spec.cluster.gpus_per_node
    source = data.source.strip() if data is not None else ""
    if f.mtbf_per_node is not None:
        return NodeRenewal(f.mtbf_per_node, f.shape), causes, source
    if f.mtbf_per_gpu is not None:
        return NodeRenewal(f.mtbf_per_gpu / c.gpus_per_node, f.shape), causes, source
    if f.every is not None:
        return _interval(f.every, file, "failures.every"), causes, source
    if f.mttf_at_scale is not None:
        mttf = _published(base / f.mttf_at_scale, file, "failures.mttf_at_scale")
        if not mttf.mttf:
            raise ScenarioError(file, "failures.mttf_at_scale", f"{f.mttf_at_scale} has no "
                                "mttf points")
        job = job_mttf_at([(p.gpus, p.hours * 3600.0) for p in mttf.mttf], gpus)
        return NodeRenewal(job * c.nodes, f.shape), causes, mttf.source.strip()
    if f.replay is not None:
        where = base / f.replay
        try:
            text = read_text_bounded(where, MAX_LOG_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(file, "failures.replay", f"cannot read {where}: "
                                f"{getattr(exc, 'strerror', None) or exc}") from None
        try:
            log = parse_failure_log(text, causes, c.nodes + c.spares)
        except FailureLogError as exc:
            raise ScenarioError(str(where), exc.where, exc.message) from None
        return Replay(tuple(log), f.replay), causes, source
    assert data is not None
    if data.observed is not None:
        o = data.observed
        mtbf = node_mtbf_from_count(o.interruptions, o.days, o.gpus, c.gpus_per_node)
        return NodeRenewal(mtbf, f.shape), causes, source
    if data.every is not None:
        return _interval(data.every, file, "failures.published"), causes, source
    raise ScenarioError(file, "failures.published", f"{f.published} has neither observed "
                        "interruptions nor a failure interval")


def _interval(every: tuple[float, float], file: str, where: str) -> JobInterval:
    if every[0] > every[1]:
        raise ScenarioError(file, where, f"expected [low, high] with low <= high, got "
                            f"{list(every)}")
    return JobInterval(*every)


def _effect_of(effects: dict[str, EffectPart], name: str, category: str, file: str) -> Effect:
    part = effects.get(name) or effects.get(category) or effects.get("default")
    if part is None:
        raise ScenarioError(file, "failures.effects", f"no effect for cause {name!r} "
                            f"(category {category!r}); expected an entry for it, for its "
                            "category, or 'default'")
    return Effect(part.effect, part.downtime, part.returns)


def _published(path: Path, file: str, field_path: str) -> PublishedFile:
    """A published failure-data file, validated (errors in it name that file; a missing
    one is the study's ``field_path``)."""
    if not path.is_file():
        raise ScenarioError(file, field_path, f"no such file {path}; expected a published "
                            "failure-data file (relative to the study file)")
    raw = load_yaml(path, str(path))
    if not isinstance(raw, dict):
        raise ScenarioError(str(path), "", "expected a mapping with keys name, source")
    data: PublishedFile = _validate(PublishedFile, raw, str(path))
    return data


# -- settings ---------------------------------------------------------------------------

def _settings(compare: GridPart | list[SettingPart] | None,
              file: str) -> tuple[list[tuple[SettingPart, str]], dict[str, list[Any]]]:
    """The settings to compare, each with the field path it came from, and what varies."""
    if compare is None:
        return [(SettingPart(), "")], {}
    if isinstance(compare, list):
        if not compare:
            raise ScenarioError(file, "compare", "expected at least one setting")
        if len(compare) > MAX_SETTINGS:
            raise ScenarioError(file, "compare", f"at most {MAX_SETTINGS} settings, got "
                                f"{len(compare)}")
        varied: dict[str, list[Any]] = {}
        for s in compare:
            for key, value in _changes(s).items():
                varied.setdefault(key, [])
                if value not in varied[key]:
                    varied[key].append(value)
        return [(s, f"compare[{i}]") for i, s in enumerate(compare)], varied
    axes = {k: v for k, v in compare.model_dump().items() if v is not None}
    if not axes:
        raise ScenarioError(file, "compare", "expected at least one of: "
                            + ", ".join(GridPart.model_fields))
    count = 1
    for values in axes.values():
        count *= len(values)
    if count > MAX_SETTINGS:
        raise ScenarioError(file, "compare", f"the grid has {count} settings; at most "
                            f"{MAX_SETTINGS}")
    out = [(SettingPart(**dict(zip(axes, combo, strict=True))), "compare")
           for combo in itertools.product(*axes.values())]
    return out, axes


def _changes(s: SettingPart) -> dict[str, Any]:
    out = {k: v for k, v in s.model_dump(exclude={"label", "knobs"}).items() if v is not None}
    out.update({f"knobs.{k}": v for k, v in s.knobs.items()})
    return out


def _job(spec: StudyFile, s: SettingPart, file: str, where: str) -> Job:
    name = s.protocol or spec.protocol.name
    here = f"{where}.protocol" if s.protocol else "protocol.name"
    if name not in PROTOCOL_NODES:
        raise ScenarioError(file, here, f"a study runs one of: {', '.join(PROTOCOL_NODES)}; "
                            f"got {name!r}{suggest(name, list(PROTOCOL_NODES))}")
    info = find_protocol(name)
    assert info is not None, "a built-in protocol"
    least, most, per_node = PROTOCOL_NODES[name]
    c = spec.cluster
    # the study's knobs are its protocol's: a setting of another protocol starts from none
    given = {**(spec.protocol.knobs if name == spec.protocol.name else {}), **s.knobs}
    forced = {**({most: c.nodes} if most else {}),
              **({per_node: c.gpus_per_node} if per_node else {})}
    for key, value in forced.items():
        if key in given and given[key] != value:
            origin = f"{where}.knobs" if key in s.knobs else "protocol.knobs"
            raise ScenarioError(file, f"{origin}.{key}", f"the study sets it from cluster "
                                f"({value}); leave it out")
    knobs: dict[str, Any] = {**({least: c.nodes} if least else {}), **given, **forced}
    if s.max_restarts is not None:
        if "max_restarts" not in _knob_names(info.knobs):
            raise ScenarioError(file, f"{where}.max_restarts", f"protocol {name} has no "
                                "max_restarts knob")
        knobs["max_restarts"] = s.max_restarts
    try:
        validate_knobs(info, knobs)
    except ValueError as exc:
        knob, _, msg = str(exc).partition(": ")
        origin = f"{where}.knobs" if knob in s.knobs else "protocol.knobs"
        raise ScenarioError(file, f"{origin}.{knob}", msg) from None
    work = spec.workload
    if s.checkpoint_interval is not None:
        work = work.model_copy(update={"checkpoint_interval": s.checkpoint_interval})
    if s.step_overhead is not None:
        work = work.model_copy(update={"step_overhead": s.step_overhead})
    if work.checkpoint_interval < work.step_time:
        raise ScenarioError(file, "workload.checkpoint_interval", f"expected at least one "
                            f"step ({work.step_time} s), got {work.checkpoint_interval}")
    changes = _changes(s)
    label = s.label or (", ".join(f"{k}={v}" for k, v in changes.items()) or "as given")
    job = Job(label, name, knobs, c.nodes, c.gpus_per_node, c.spares, c.device, work, changes)
    return replace(job, spares=s.spares) if s.spares is not None else job


def _knob_names(cls: type | None) -> set[str]:
    import dataclasses

    return {f.name for f in dataclasses.fields(cls)} if cls is not None else set()
