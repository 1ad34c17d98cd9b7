# syntax=docker/dockerfile:1
# The scheduler image: the scheduler package, the shared vocabulary it imports from common/ (power
# curves, power profiles, Kubernetes quantities and timestamps, argparse helpers, cloud instances'
# coefficients with their data file: the list is the import graph's, checked by
# tests/deploy/test_deploy_images.py), and the `scheduler` extra (fastapi,
# uvicorn, httpx; grpcio and protobuf for `autoscaler-expander`). No torch: every scorer it ships,
# the learned ones included, runs on numpy (a model is exported to .npz by `kubejoule-rl train`).
# Build from the repository root:
#   docker build -f daemonset/images/scheduler.Dockerfile -t ghcr.io/kubejoule/kubejoule-scheduler:0.1.0 .
# The base image is pinned by tag here: pin it by digest where you build, e.g.
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest of your mirror's copy>
# (the digest could not be read where this file was written: no registry access).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY daemonset/images/locks/scheduler.txt ./requirements.lock
COPY common/__init__.py common/cloud_estimates.py common/curves.py common/jsonvalue.py common/kubetime.py common/metrics.py common/options.py common/power_profile.py common/protoc.py common/quantity.py ./common/
COPY common/cloud/instances.csv ./common/cloud/
COPY scheduler ./scheduler
# The dependencies exactly as locked, versions and hashes (daemonset/images/locks/scheduler.txt,
# which tests/deploy checks against pyproject.toml), then the package alone: nothing resolved
# at build time.
RUN pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r requirements.lock \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ".[scheduler]"

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "kubejoule[scheduler]" \
    && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Any non-root user: the scheduler only talks to the API server and serves HTTP.
USER 65532:65532
EXPOSE 10260 8888 8443 8890
ENTRYPOINT ["kubejoule-scheduler"]
CMD ["run", "--config", "/etc/kubejoule/scheduler.yaml"]
