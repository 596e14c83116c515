"""``--launcher k8s`` writes manifests that run one pod per host."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elastic_sim.real.cluster.k8s import MOUNT, manifests
from elastic_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
SCALE_DOWN = ROOT / "scenarios" / "torchelastic" / "scale_down.yaml"


def _kinds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _kinds(docs)["Job"]["spec"]["template"]["spec"]["containers"][0]


def test_one_pod_per_host_in_an_indexed_job() -> None:
    sc = load_scenario(SCALE_DOWN)
    docs = manifests(SCALE_DOWN, sc, 0, "img:1", 29400)
    job = _kinds(docs)["Job"]["spec"]
    hosts = len(sc.cluster.host_specs())
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", hosts,
                                                                              hosts)
    env = {e["name"]: e["value"] for e in _container(docs)["env"]}
    assert env["ES_NODES"] == str(hosts)


def test_the_coordinator_is_pod_zero_behind_a_headless_service() -> None:
    sc = load_scenario(SCALE_DOWN)
    docs = manifests(SCALE_DOWN, sc, 0, "img:1", 29400)
    svc, job = _kinds(docs)["Service"], _kinds(docs)["Job"]
    name = job["metadata"]["name"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"job-name": name}
    assert svc["spec"]["ports"][0]["port"] == 29400
    assert job["spec"]["template"]["spec"]["subdomain"] == svc["metadata"]["name"]
    container = _container(docs)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ES_COORDINATOR"] == f"{name}-0.{svc['metadata']['name']}:29400"
    script = container["command"][-1]
    assert '"$JOB_COMPLETION_INDEX" = 0' in script and "--launcher env" in script
    assert "--port 29400" in script and "elastic-sim node" in script


def test_the_secret_and_scenario_are_mounted_files() -> None:
    sc = load_scenario(SCALE_DOWN)
    docs = manifests(SCALE_DOWN, sc, 0, "img:1", 29400, secret="s" * 32)
    kinds = _kinds(docs)
    assert base64.b64decode(kinds["Secret"]["data"]["secret"]).decode() == "s" * 32
    assert kinds["ConfigMap"]["data"]["scenario.yaml"] == SCALE_DOWN.read_text()
    container = _container(docs)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ES_SECRET_FILE"].startswith(mounts["secret"])
    assert mounts["scenario"] == f"{MOUNT}/scenario"
    volumes = {v["name"]: v for v in kinds["Job"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["secret"]["secret"]["secretName"] == kinds["Secret"]["metadata"]["name"]
    assert "ES_SECRET" not in env  # never in the pod spec in clear


def test_resources_and_a_gpu_request_when_the_device_is_cuda(tmp_path: Path) -> None:
    cpu = load_scenario(SCALE_DOWN)
    assert "limits" not in _container(manifests(SCALE_DOWN, cpu, 0, "i", 1))["resources"]
    text = SCALE_DOWN.read_text().replace("cluster:\n", "cluster:\n  device: cuda\n", 1)
    path = tmp_path / "gpu.yaml"
    path.write_text(text)
    gpu = load_scenario(path)
    resources = _container(manifests(path, gpu, 0, "i", 1))["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["nvidia.com/gpu"] == int(gpu.protocol.knobs.get(
        "nproc_per_node", 1))


def test_the_cli_writes_them_without_running_anything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "elastic_sim", "run", str(SCALE_DOWN), "--mode", "real",
         "--launcher", "k8s", "--out", str(out)] if (ROOT / "elastic_sim" / "__main__.py").exists()
        else [sys.executable, "-c", "import sys; from elastic_sim.cli import main; "
              "sys.exit(main(sys.argv[1:]))", "run", str(SCALE_DOWN), "--mode", "real",
              "--launcher", "k8s", "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    path = out / "k8s" / "elastic-sim.yaml"
    docs = [json.loads(d) for d in path.read_text().split("---\n") if d.strip()]
    assert [d["kind"] for d in docs] == ["ConfigMap", "Secret", "Service", "Job"]
    assert path.stat().st_mode & 0o077 == 0  # it holds the secret
    assert not (out / "trace.jsonl").exists()


def test_the_manifests_pass_the_kubernetes_schema_strictly(tmp_path: Path) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    sc = load_scenario(SCALE_DOWN)
    text = SCALE_DOWN.read_text().replace("cluster:\n", "cluster:\n  device: cuda\n", 1)
    gpu_file = tmp_path / "gpu.yaml"
    gpu_file.write_text(text)
    for path, scen in ((SCALE_DOWN, sc), (gpu_file, load_scenario(gpu_file))):
        for doc in manifests(path, scen, 0, "img:1", 29400):
            validate.validate(doc, "1.30", strict=True)
    broken = manifests(SCALE_DOWN, sc, 0, "img:1", 29400)[-1]
    broken["spec"]["completionMode"] = 7  # the check can fail
    with pytest.raises(validate.ValidationError):
        validate.validate(broken, "1.30", strict=True)
