# The image `elastic-sim run ... --mode real --launcher k8s` names (--image): elastic-sim
# and torch, for the pods of a Kubernetes Indexed Job. Build it from the repository:
#
#   python3 -m pip wheel --no-deps -w dist .
#   docker build -t REGISTRY/elastic-sim:0.1.0 .
#   docker push REGISTRY/elastic-sim:0.1.0
#
# TORCH picks the build: the CPU wheel by default (Gloo groups); a CUDA build for
# cluster.device: cuda (NCCL), e.g. --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126
FROM python:3.11-slim

ARG TORCH=torch==2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

# iproute2 and nftables: network faults inside a pod (a partition's cut, link shaping).
RUN apt-get update \
    && apt-get install -y --no-install-recommends iproute2 nftables procps \
    && rm -rf /var/lib/apt/lists/*
RUN python -m pip install --no-cache-dir --index-url "$TORCH_INDEX" "$TORCH"
COPY dist/elastic_sim-*.whl /tmp/
RUN python -m pip install --no-cache-dir /tmp/elastic_sim-*.whl && rm /tmp/elastic_sim-*.whl \
    && elastic-sim --version

# The manifests run `elastic-sim node` (and pod 0 the coordinator) through /bin/sh.
CMD ["elastic-sim", "--help"]
