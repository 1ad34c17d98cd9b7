# syntax=docker/dockerfile:1
# The scheduler image: the scheduler and agent packages with the `scheduler` extra (fastapi,
# uvicorn, httpx; grpcio and protobuf for `autoscaler-expander`). Without torch: the heuristic
# scorer needs none; a model scorer needs an image built with `.[scheduler,ml]` (and a CPU torch wheel pinned first, as the Makefile does).
# Build from the repository root:
#   docker build -f daemonset/images/scheduler.Dockerfile -t ghcr.io/kubejoule/kubejoule-scheduler:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY agent ./agent
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
