"""``elastic-sim schema``: the JSON Schema generated from the validating classes accepts
every shipped scenario, rejects what the loader rejects, and is what the shipped files
point their editors at; the README's fault table is generated from the same classes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_sim.cli import main
from elastic_sim.schema import SCHEMA_FILE, fault_reference, scenario_schema, schema_text
from tests.conftest import ROOT, SCENARIOS

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")

EDITOR_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)\n")


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 floats (``3.0e9``), as editors read a scenario (PyYAML's 1.1 reads a
    string, which pydantic then converts; JSON Schema rightly does not)."""


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$"
               r"|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def _validator() -> Any:
    schema = scenario_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _load12(text: str) -> Any:
    return yaml.load(text, Loader=Yaml12Loader)


def test_every_shipped_scenario_validates_against_the_schema(shipped_scenarios: list[Path]
                                                              ) -> None:
    v = _validator()
    assert len(shipped_scenarios) > 40
    for path in shipped_scenarios:
        errors = [f"{list(e.absolute_path)}: {e.message}"
                  for e in v.iter_errors(_load12(path.read_text("utf-8")))]
        assert not errors, f"{path}: {errors}"


BASE = """\
protocol: {name: static, knobs: {min_hosts: 2}}
cluster: {hosts: 4}
faults:
  - {type: crash, host: h3, at: 1.5}
"""


@pytest.mark.parametrize(("change", "where"), [
    (("type: crash", "type: crsh"), ["faults", 0]),        # unknown fault type
    (("at: 1.5", "at: -1"), ["faults", 0]),                 # negative time
    (("host: h3, ", ""), ["faults", 0]),                    # missing required field
    (("min_hosts: 2", "min_host: 2"), ["protocol", "knobs"]),  # unknown knob of static
    (("min_hosts: 2", "min_hosts: two"), ["protocol", "knobs", "min_hosts"]),
    (("hosts: 4", "hosts: 4, hots: 2"), ["cluster"]),       # unknown key
], ids=["fault_type", "negative_at", "missing_host", "knob_name", "knob_type", "extra_key"])
def test_schema_rejects_what_the_loader_rejects(change: tuple[str, str], where: list[Any],
                                                write_scenario: Any) -> None:
    v = _validator()
    assert not list(v.iter_errors(_load12(BASE)))
    bad = BASE.replace(*change)
    assert main(["validate", str(write_scenario(bad))]) == 2
    errors = list(v.iter_errors(_load12(bad)))
    assert errors, f"schema accepted {bad!r}"
    paths = [list(e.absolute_path) for e in errors]
    assert any(p[:len(where)] == where for p in paths), paths


def test_shipped_schema_file_is_current() -> None:
    shipped = (SCENARIOS / SCHEMA_FILE).read_text("utf-8")
    assert json.loads(shipped) == json.loads(schema_text()), (
        "regenerate: elastic-sim schema > scenarios/scenario.schema.json")


def test_every_shipped_scenario_points_its_editor_at_the_schema(
        shipped_scenarios: list[Path]) -> None:
    for path in shipped_scenarios:
        m = EDITOR_LINE.match(path.read_text("utf-8"))
        assert m, f"{path}: first line must be '# yaml-language-server: $schema=...'"
        target = (path.parent / m.group(1)).resolve()
        assert target == (SCENARIOS / SCHEMA_FILE).resolve(), (path, m.group(1))
        assert os.path.isfile(target)


def test_schema_command_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == scenario_schema()
    assert printed["$schema"].endswith("2020-12/schema")
    assert set(printed["properties"]) >= {"protocol", "cluster", "workload", "faults", "expect"}


def test_readme_fault_table_is_generated_and_current() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    start, end = "<!-- fault-types: generated", "<!-- /fault-types -->"
    assert start in readme and end in readme
    block = readme.split(start, 1)[1].split("-->", 1)[1].split(end, 1)[0].strip()
    assert block == fault_reference(), (
        "regenerate: elastic-sim schema --faults-markdown")
    from elastic_sim.fault_schema import FAULT_TAGS

    assert all(f"| `{t}` |" in block for t in FAULT_TAGS)


def test_every_knob_of_every_built_in_protocol_is_described_in_prose() -> None:
    from elastic_sim.registry import BUILTIN_PROTOCOLS
    from elastic_sim.schema import scenario_schema

    defs = scenario_schema()["$defs"]
    for info in BUILTIN_PROTOCOLS.values():
        assert info.knobs is not None
        props = defs[info.knobs.__name__]["properties"]
        missing = [k for k, p in props.items() if len(p.get("description", "")) < 20]
        assert missing == [], info.knobs.__name__
    text = json.dumps(defs)
    assert not re.search(r":(mod|class|func|meth|data):`|issue \d", text)
