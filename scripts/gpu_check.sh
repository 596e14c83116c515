#!/bin/bash
# What a GPU machine can show of the NCCL path, in one run (the `device` tool's machine:
# one GPU, no network; the project and its missing dependencies travel as wheels in .whl/,
# built with `pip wheel --no-deps -w .whl .` and `pip download` for simpy and pydantic):
#   1. benchmarks/calibrate_nccl.py: torch's NCCL timeout, teardown and heartbeat monitor
#      on a collective that never completes, against the sim's NCCL profile;
#   2. benchmarks/nccl_one_gpu.yaml in real mode: the project's own NCCL group (one
#      worker), training, state broadcast and teardown, next to the sim's run of it.
# Results go to $OUT (default /tmp/gpu-out).
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
ROOT=$PWD
cd /tmp  # not the checkout: its elastic_sim/ folder is not the installed package
python3 -m elastic_sim run "$ROOT/benchmarks/nccl_one_gpu.yaml" --mode real --out /tmp/g1 \
    2>&1 | tee "$OUT/real_one_gpu.log"
cp /tmp/g1/summary.json "$OUT/real_one_gpu_summary.json" 2>/dev/null
python3 -m elastic_sim run "$ROOT/benchmarks/nccl_one_gpu.yaml" --out /tmp/g1s --no-report \
    2>&1 | tail -4 | tee -a "$OUT/real_one_gpu.log"
cd "$ROOT"
python3 benchmarks/calibrate_nccl.py --timeout 10 --linger 60 --out "$OUT" 2>&1 \
    | tee "$OUT/calibrate.log"
