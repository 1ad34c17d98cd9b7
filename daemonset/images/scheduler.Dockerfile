# syntax=docker/dockerfile:1
# The scheduler image: the scheduler package, the agent's plain-data modules it imports (power
# curves, power profiles, Kubernetes quantities and timestamps, argparse helpers: the list is the import
# graph's, checked by tests/deploy/test_deploy_images.py), and the `scheduler` extra (fastapi,
# uvicorn, httpx; grpcio and protobuf for `autoscaler-expander`). No torch: every scorer it ships,
# the learned ones included, runs on numpy (a model is exported to .npz by `kubejoule-rl train`).
# Build from the repository root:
#   docker build -f daemonset/images/scheduler.Dockerfile -t ghcr.io/kubejoule/kubejoule-scheduler:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY agent/__init__.py agent/curves.py agent/kubetime.py agent/options.py agent/power_profile.py agent/quantity.py ./agent/
COPY agent/protos/__init__.py agent/protos/generate.py ./agent/protos/
COPY scheduler ./scheduler
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[scheduler]"

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
