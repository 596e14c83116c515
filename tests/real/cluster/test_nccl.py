"""``cluster.device: cuda``: NCCL's failure semantics in the sim, and NCCL groups for real
where GPUs exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.procs import membership
from tests.real.cluster.conftest import ROOT, cli, summary

STATIC = ROOT / "scenarios" / "scale_down.yaml"


def _on(device: str, tmp_path: Path) -> Path:
    text = STATIC.read_text().replace("cluster:", f"cluster:\n  device: {device}", 1)
    path = tmp_path / f"{device}.yaml"
    path.write_text(text)
    return path


def test_a_dead_nccl_peer_is_seen_only_at_the_group_timeout(tmp_path: Path) -> None:
    recovered = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        cli("run", str(_on(device, tmp_path)), "--out", str(out), "--no-report", timeout=120)
        (rec,) = summary(out)["metrics"]["recoveries"]
        recovered[device] = rec
    timeout = 30.0  # scenarios/scale_down.yaml: group_timeout
    assert recovered["cpu"]["phases"]["detect"] < 0.17  # Gloo: within the calibrated 0.17 s
    assert recovered["cuda"]["phases"]["detect"] == pytest.approx(timeout, abs=0.01)


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.real
@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="NCCL needs a GPU per rank: fewer than 2 GPUs here")
def test_nccl_groups_train_and_recover_like_the_sim(tmp_path: Path) -> None:
    path = _on("cuda", tmp_path)
    sim, real = tmp_path / "sim", tmp_path / "real"
    cli("run", str(path), "--out", str(sim), "--no-report")  # its max_recovery_s fails: no matter
    done = cli("run", str(path), "--mode", "real", "--out", str(real), "--no-report")
    assert membership(summary(real)) == membership(summary(sim)), done.stdout + done.stderr
    (rec,) = summary(real)["metrics"]["recoveries"]
    assert rec["phases"]["detect"] >= 0.9 * 30.0  # NCCL: the dead peer is seen at the timeout
