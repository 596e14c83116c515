"""``--launcher k8s``: the manifests that run a scenario on a Kubernetes cluster.

One Indexed Job runs a pod per scenario host (``JOB_COMPLETION_INDEX`` is the node index),
a headless Service gives pod 0 a stable name, and pod 0 also runs the coordinator
(``elastic-sim run --launcher env``) next to its node. The scenario travels in a
ConfigMap and the run's secret in a Secret, mounted as files; the control port is the
Service's only port. With ``cluster.device: cuda`` each pod asks for the GPUs its host's
workers use.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

from elastic_sim.real.cluster import wire
from elastic_sim.real.cluster.place import COORDINATOR_ENV, NODES_ENV
from elastic_sim.scenario import Scenario

MOUNT = "/etc/elastic-sim"
OUT = "/tmp/elastic-sim-out"


def _name(text: str) -> str:
    """A DNS-1123 label from ``text``."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return ("es-" + label)[:40].rstrip("-") or "es-run"


def manifests(scenario_file: Path, sc: Scenario, seed: int, image: str, port: int,
              secret: str | None = None) -> list[dict[str, Any]]:
    """The objects to ``kubectl apply``: ConfigMap, Secret, Service, Job."""
    name = _name(sc.name)
    hosts = len(sc.cluster.host_specs())
    gpus = int(sc.protocol.knobs.get("nproc_per_node", 1)) if sc.cluster.device == "cuda" else 0
    labels = {"app.kubernetes.io/name": "elastic-sim", "elastic-sim/run": name}
    coordinator = (
        f"elastic-sim run {MOUNT}/scenario/scenario.yaml --mode real --launcher env "
        f"--bind 0.0.0.0 --port {port} --nodes {hosts} --seed {seed} --out {OUT} & C=$!; "
    )
    script = (
        f'C=""; if [ "$JOB_COMPLETION_INDEX" = 0 ]; then {coordinator}fi; '
        'elastic-sim node; N=$?; if [ -n "$C" ]; then wait $C; R=$?; '
        f'cat {OUT}/summary.json 2>/dev/null; exit $R; fi; exit $N'
    )
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "2Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    text = scenario_file.read_text(encoding="utf-8")
    token = secret or wire.new_secret()
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": f"{name}-scenario", "labels": labels},
         "data": {"scenario.yaml": text}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": f"{name}-secret", "labels": labels},
         "data": {"secret": base64.b64encode(token.encode()).decode()}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "labels": labels},
         "spec": {"clusterIP": "None", "selector": {"job-name": name},
                  "publishNotReadyAddresses": True,
                  "ports": [{"name": "control", "port": port, "protocol": "TCP"}]}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": name, "labels": labels},
         "spec": {
             "completionMode": "Indexed", "completions": hosts, "parallelism": hosts,
             "backoffLimit": 0,
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {
                     "subdomain": name, "restartPolicy": "Never",
                     "containers": [{
                         "name": "node", "image": image,
                         "command": ["/bin/sh", "-c", script],
                         "env": [
                             {"name": NODES_ENV, "value": str(hosts)},
                             {"name": COORDINATOR_ENV, "value": f"{name}-0.{name}:{port}"},
                             {"name": wire.SECRET_FILE_ENV, "value": f"{MOUNT}/secret/secret"},
                         ],
                         "ports": [{"name": "control", "containerPort": port}],
                         "resources": resources,
                         "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                         "volumeMounts": [
                             {"name": "scenario", "mountPath": f"{MOUNT}/scenario",
                              "readOnly": True},
                             {"name": "secret", "mountPath": f"{MOUNT}/secret",
                              "readOnly": True},
                         ],
                     }],
                     "volumes": [
                         {"name": "scenario", "configMap": {"name": f"{name}-scenario"}},
                         {"name": "secret", "secret": {"secretName": f"{name}-secret",
                                                       "defaultMode": 0o400}},
                     ],
                 },
             },
         }},
    ]


def write_manifests(scenario_file: Path, sc: Scenario, seed: int, out_dir: Path, image: str,
                    port: int) -> Path:
    """Write the manifests as one multi-document YAML file (JSON documents, which YAML
    reads); its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "elastic-sim.yaml"
    docs = manifests(scenario_file, sc, seed, image, port)
    tmp = path.with_suffix(".yaml.part")
    tmp.write_text("".join("---\n" + json.dumps(d, indent=2) + "\n" for d in docs),
                   encoding="utf-8")
    tmp.chmod(0o600)  # it holds the run's secret
    tmp.replace(path)
    return path
