"""The k8s launcher's image is buildable from the repository: the Dockerfile installs the
torch that CI pins and the wheel that the README's build line makes, and checks the
console script runs (docker itself is not available here; the file is held to that)."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_the_dockerfile_installs_the_pinned_torch_and_the_built_wheel() -> None:
    docker = (ROOT / "Dockerfile").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    (pin,) = set(re.findall(r"torch==[\d.]+", ci))
    assert f"ARG TORCH={pin}" in docker
    assert re.search(r"^COPY dist/elastic_sim-\*\.whl", docker, re.M)
    assert "pip install --no-cache-dir /tmp/elastic_sim-*.whl" in docker
    assert "elastic-sim --version" in docker  # the build fails if the install is broken
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip wheel --no-deps -w dist . && docker build" in readme
