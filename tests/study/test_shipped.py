"""Every shipped study loads (its published data found and valid), and says what it had
to assume; the rendezvous scenario beside them is a scenario that parses."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_sim.scenario import parse_scenario
from elastic_sim.strict_yaml import load_yaml
from elastic_sim.study.load import load_study
from tests.conftest import ROOT

STUDIES = sorted(p for p in (ROOT / "studies").glob("*.yaml")
                 if not p.name.startswith("rendezvous_"))


def test_the_shipped_studies_are_the_ones_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in STUDIES] == ["clockwork_64xh200.yaml", "direct_vs_composed_8n.yaml",
                                         "llama3_54d.yaml", "llama3_54d_stores.yaml",
                                         "llama3_grid.yaml"]
    for p in STUDIES:
        assert f"`{p.name}`" in readme


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_a_shipped_study_loads_and_states_its_assumptions(path: Path) -> None:
    study = load_study(path)
    assert study.jobs and study.causes
    assert study.spec.assumptions, "a shipped study says which constants it assumed"


def test_the_llama3_studies_use_the_published_counts() -> None:
    study = load_study(ROOT / "studies" / "llama3_54d.yaml")
    shares = {c.name: c.share for c in study.causes}
    assert sum(shares.values()) == 419
    assert shares["faulty_gpu"] == 148 and shares["gpu_hbm3_memory"] == 72
    grid = load_study(ROOT / "studies" / "llama3_grid.yaml")
    assert sorted(grid.varied) == ["checkpoint_interval", "spares"]
    assert len(grid.jobs) == 8


def test_the_clockwork_study_compares_restart_all_with_torchft_at_the_published_job() -> None:
    """8 nodes x 8 GPUs, 3,000 steps, a checkpoint every 100 steps, failures every
    2,700-4,500 s (the published file), and the published completion times beside the
    settings they name."""
    study = load_study(ROOT / "studies" / "clockwork_64xh200.yaml")
    assert [(j.label, j.protocol, j.workload.step_overhead) for j in study.jobs] == [
        ("restart-all", "torchelastic", 0.0), ("torchft", "torchft", 0.0),
        ("torchft +2 s", "torchft", 2.0), ("torchft +4 s", "torchft", 4.0)]
    job = study.jobs[0]
    assert (job.nodes, job.workload.steps, job.commit_steps) == (8, 3000, 100)
    assert study.spec.reference is not None
    assert study.spec.reference.completion_minutes_of == {"restart-all": 818, "torchft": 930}


def test_the_rendezvous_scenario_parses_at_4000_hosts() -> None:
    path = ROOT / "studies" / "rendezvous_4000_hosts.yaml"
    sc = parse_scenario(load_yaml(path, str(path)), str(path))
    assert len(sc.cluster.host_specs()) == 4000
