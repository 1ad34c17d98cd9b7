# syntax=docker/dockerfile:1
# The node agent image: the agent package and its core dependencies only (psutil, pyroute2,
# prometheus-client, kubernetes, pyyaml, numpy, nvidia-ml-py, h2, protobuf). No scheduler, no
# fastapi, no torch, no CUDA: NVML is the driver's own libnvidia-ml.so.1, which NVIDIA's container
# runtime mounts on GPU nodes (daemonset/components/gpu).
# Build from the repository root:
#   docker build -f daemonset/images/agent.Dockerfile -t ghcr.io/kubejoule/kubejoule-agent:0.1.0 .
# The base image is pinned by tag here: pin it by digest where you build, e.g.
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest of your mirror's copy>
# (the digest could not be read where this file was written: no registry access).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY daemonset/images/locks/agent.txt ./requirements.lock
COPY common ./common
COPY agent ./agent
# The dependencies exactly as locked, versions and hashes (daemonset/images/locks/agent.txt,
# which tests/deploy checks against pyproject.toml), then the package alone: nothing resolved
# at build time.
RUN pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r requirements.lock \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels kubejoule \
    && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Root, with every capability dropped by the DaemonSet: energy_uj is readable by root only
# (CVE-2020-8694). See docs/deploy.md.
USER 0
EXPOSE 9102
ENTRYPOINT ["kubejoule-agent"]
CMD ["run", "--listen", ":9102", "--procfs", "/host/proc", "--sysfs", "/host/sys"]
